#!/usr/bin/env bash
# Runs the benchmarks and prints subactor beside the raw protoactor floor:
# the median of COUNT runs (default 5) of ns/op, B/op and allocs/op, and the
# ratio of each to the floor.
set -euo pipefail
cd "$(dirname "$0")"
go test -run '^$' -bench . -benchmem -count "${COUNT:-5}" -timeout 15m . | go run ./cmd/report
