//go:build subactortest

package main

import (
	"github.com/subactor/subactor/cmd/node/internal/crashhook"
	"github.com/subactor/subactor/persistence"
)

// withCrashHooks wraps store in the crash test's hooks when the
// environment asks for them (package crashhook). Only a node built with
// the subactortest tag, as its tests build it, has them.
func withCrashHooks(store persistence.Store) (persistence.Store, func() error, error) {
	return crashhook.Wrap(store)
}
