//go:build !linux

package main

// harden has nothing to do here: only Linux has PR_SET_DUMPABLE.
func harden() error { return nil }
