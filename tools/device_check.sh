#!/usr/bin/env bash
# The device check (issue 22): every GPU test and GPU benchmark on a machine with a CUDA GPU,
# one summary at the end, within 8 minutes.
#
# The device machine of this workplace has a GPU but none of Crescent's build dependencies, and
# nothing can be installed there or reached from it. So the binaries are built here and packed
# with the libraries they load (tools/device_bundle.sh), the bundle travels, and this script
# runs it there:
#   here:   tools/device_bundle.sh build          # a CUDA build (nvcc is enough, no GPU)
#   there:  tools/device_check.sh                 # device tool: carry [".device"]
# On a machine that has both a GPU and the build dependencies, `tools/device_check.sh --build`
# builds into build/ first (tools/build.sh) and packs the bundle from it.
# Logs go to $OUT/device_logs when $OUT is set (the device tool copies it back), else to
# .device/logs. Exit status: the bundle's (0: every check ran and passed).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
limit_s=${CRESCENT_DEVICE_CHECK_SECONDS:-480}
if [ "${1:-}" = "--build" ]; then
  "$root/tools/build.sh" && "$root/tools/device_bundle.sh" "$root/build" || exit 2
fi
if [ ! -x "$root/.device/run.sh" ]; then
  echo "device_check: no bundle at .device/: run tools/device_bundle.sh on a CUDA build first" >&2
  exit 2
fi
if [ -n "${OUT:-}" ]; then
  export CRESCENT_DEVICE_LOGS="$OUT/device_logs"
fi
timeout --kill-after=10 "$limit_s" "$root/.device/run.sh"
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
  echo "device_check: stopped after ${limit_s} s (CRESCENT_DEVICE_CHECK_SECONDS)" >&2
fi
exit $rc
