//go:build unix

package rootfile

import "syscall"

const nonBlock = syscall.O_NONBLOCK
