#!/usr/bin/env bash
# Configures and builds Crescent into build/ (RelWithDebInfo, Ninja, ccache). Extra arguments go
# to the configure step, e.g. -DCRESCENT_WITH_CUDA=OFF.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
"$root/tools/setup.sh"
# Two cores and about 0.7 GB per CAF-heavy translation unit: two jobs at most.
jobs=${CRESCENT_BUILD_JOBS:-2}
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "$@" >/dev/null
cmake --build build -j "$jobs"
