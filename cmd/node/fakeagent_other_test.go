//go:build !linux

package main

import "errors"

// The fake agent's family and its reading of the node's environment are
// Linux's (see fakeagent_linux_test.go); the tests that use them too.

func startFamily(string) error { return errors.New("no family here: Linux only") }

func parentEnviron() string { return "not tried: Linux only" }
