//go:build !linux

package main

// The memory-measuring launcher reads Linux's rusage (see
// damage_linux_test.go); elsewhere it is never asked for.
const envPeakRSS = "NODETEST_PEAK_RSS_FILE"

func runPeakRSS() int { return 125 }
