#!/usr/bin/env bash
# The tests: installs what is missing, builds, and runs every suite except those labelled
# `slow` (fuzzing, soak, long simulations; run them with `ctest --test-dir build -L slow`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/build.sh"
cd "$root"
exec ctest --test-dir build -LE slow --output-on-failure -j 2 "$@"
