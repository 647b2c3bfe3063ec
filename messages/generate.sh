#!/usr/bin/env bash
# Regenerates the Go code for messages/*.proto. Needs protoc (Debian's
# protobuf-compiler) and protoc-gen-go v1.36.12 on PATH; .ci/run installs both
# and fails when the committed code differs from a fresh generation.
set -euo pipefail
cd "$(dirname "$0")"
protoc --go_out=. --go_opt=paths=source_relative ./*.proto
