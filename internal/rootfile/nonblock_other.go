//go:build !unix

package rootfile

// nonBlock is 0 where there are no FIFOs to wait on in a directory tree
// (Windows names pipes outside it); the checks before and after opening
// still refuse anything but a regular file.
const nonBlock = 0
