//go:build subactortest

package guard

import "sync/atomic"

// Hook runs before every message a seam actor handles. Tests set one to
// inject real panics inside Receive.
type Hook func(actor string, msg any)

var hook atomic.Pointer[Hook]

// SetHook installs h until the returned restore is called.
func SetHook(h Hook) (restore func()) {
	hook.Store(&h)
	return func() { hook.Store(nil) }
}

// Enter is called first in a seam actor's Receive: it runs the test hook,
// if any, inside the actor's recovery.
func Enter(kind string, msg any) {
	if h := hook.Load(); h != nil {
		(*h)(kind, msg)
	}
}
