//go:build !subactortest

package guard

// Enter is called first in a seam actor's Receive. Without the
// subactortest tag there is no test hook to run (see hook_on.go).
func Enter(string, any) {}
