//go:build !subactortest

package main

import "github.com/subactor/subactor/persistence"

// withCrashHooks returns store as it is: the product binary has no crash
// test hooks (see hooks_on.go).
func withCrashHooks(store persistence.Store) (persistence.Store, func() error, error) {
	return store, func() error { return nil }, nil
}
