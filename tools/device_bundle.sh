#!/usr/bin/env bash
# Packs the GPU checks for a machine that has a GPU but none of Crescent's build dependencies
# (this workplace's device machine: nothing can be installed there, nothing reached from it).
# Into .device/ (ignored by git): the CUDA test binaries and `crescent`, stripped, and every
# shared library they load here except glibc's and the CUDA driver's. There, from the repo root:
#   .device/run.sh            # the CUDA tests, `crescent bench gpu`, `bench transfer --only cuda`
# (tools/device_check.sh runs it with a time limit and leaves its logs under $OUT).
# With the device tool: run(command=".device/run.sh", carry=[".device"], timeout_s=...).
#
# Usage: tools/device_bundle.sh [build-dir]   (default build; it must be built with CUDA)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=$root/.device
bins=(tests/transport/crescent_transport_cuda_tests tests/gpu/crescent_gpu_tests
  tests/system/crescent_system_tests apps/crescent)

grep -q "CRESCENT_WITH_CUDA:BOOL=ON" "$build/CMakeCache.txt" ||
  { echo "device_bundle: $build is not a CUDA build" >&2; exit 2; }
ninja -C "$build" "${bins[@]}" >/dev/null
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for b in "${bins[@]}"; do
  strip -o "$out/bin/$(basename "$b")" "$build/$b"
done
# Every library the binaries load from this machine, but glibc's (the other machine's glibc is
# the one that matches its kernel) and libcuda (the driver's own).
ldd "$out"/bin/* | awk '/=> \//{print $3}' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done
cat >"$out/run.sh" <<'RUN'
#!/usr/bin/env bash
# Runs the GPU checks with the libraries packed beside this script, each step's output into
# a log beside it, and prints one summary at the end. Exit 0 only if every step passed and
# nothing that needs the GPU skipped.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
logs=${CRESCENT_DEVICE_LOGS:-$here/logs}
mkdir -p "$logs"
# What the bundle meets there: its libstdc++ needs glibc 2.36; a GPU in exclusive-process mode
# refuses the transfer benchmark's second process.
{ nvidia-smi -L || echo "nvidia-smi: no GPU listed"; getconf GNU_LIBC_VERSION
  nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv || true; } |
  tee "$logs/machine.txt"
summary=()
step() { # name, command...: runs it into logs/NAME.txt, notes how it ended
  local name=$1; shift
  local start=$SECONDS
  "$@" >"$logs/$name.txt" 2>&1
  local rc=$?
  local verdict=passed
  [ $rc -ne 0 ] && verdict="FAILED (exit $rc)"
  if grep -Eq "^\[  SKIPPED \]|^skipped:|skipped" "$logs/$name.txt"; then
    [ $rc -eq 0 ] && verdict="SKIPPED (a GPU check must run here)"
    rc=1
  fi
  summary+=("$(printf '%-22s %-40s %4ds' "$name" "$verdict" $((SECONDS - start)))")
  [ $rc -eq 0 ]
}
status=0
step transport_cuda_tests "$here/bin/crescent_transport_cuda_tests" || status=1
step gpu_tests "$here/bin/crescent_gpu_tests" --gtest_filter='cuda*:device_engine*' || status=1
# A cluster on the cuda engine decoding what monolithic reference runs do.
step cluster_tests "$here/bin/crescent_system_tests" --gtest_filter='cluster.the_cuda*' || status=1
# The embedded cluster in real time on the cuda engine: every request must complete.
cd "$here/.." || exit 2
step cluster_run "$here/bin/crescent" run --config docs/cuda.cluster.yaml --requests 100 \
  --no-progress || status=1
# The device engine against the CPU reference, and page gathers against a copy (about 1 min).
step bench_gpu "$here/bin/crescent" bench gpu || status=1
# The transfer engine's cuda rows in full (48 rows of 5 x 0.2 s trials and their baselines:
# about 2 minutes).
step bench_transfer_cuda "$here/bin/crescent" bench transfer --only cuda || status=1
echo
echo "== device check: $(head -1 "$logs/machine.txt")"
printf '%s\n' "${summary[@]}"
echo "== crescent bench gpu"
grep -E "^(engine|prefill|decode|greedy|first|device run|pages|gather|scatter|copy)" "$logs/bench_gpu.txt" || true
echo "== crescent run on the cuda engine"
grep -E "^(requests|TTFT|TBT)" "$logs/cluster_run.txt" || true
grep -HE "^\[  (PASSED|FAILED)  \]" "$logs"/*tests.txt || true
echo "logs: $logs"
exit $status
RUN
chmod +x "$out/run.sh"
du -sh "$out" | awk '{print "device_bundle: " $1 " in .device (64 MiB may travel)"}'
