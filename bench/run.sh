#!/usr/bin/env bash
# Runs every benchmark in one process and writes bench/RESULTS.md and
# bench/results.json (see cmd/bench). Arguments go to cmd/bench, e.g.
# bench/run.sh -count 3 -scale 1000,10000.
set -euo pipefail
cd "$(dirname "$0")"
go run ./cmd/bench "$@"
