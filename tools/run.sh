#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs `crescent run` on the embedded
# default cluster (1 conductor, 2 prefill, 2 decode, a block owner per node, 1 store master),
# replaying the first 200 requests of the Mooncake trace. Arguments go to `crescent run`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/tools/build.sh"
cd "$root"
exec "$root/build/apps/crescent" run "$@"
