#!/usr/bin/env bash
# Packs the GPU checks for a machine that has a GPU but none of Crescent's build dependencies
# (this workplace's device machine: nothing can be installed there, nothing reached from it).
# Into .device/ (ignored by git): the CUDA test binaries and `crescent`, stripped, and every
# shared library they load here except glibc's and the CUDA driver's. There, from the repo root:
#   .device/run.sh            # the CUDA tests, then `crescent bench transfer --only cuda`
# With the device tool: run(command=".device/run.sh", carry=[".device"], timeout_s=...).
#
# Usage: tools/device_bundle.sh [build-dir]   (default build-lead; it must be built with CUDA)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-lead}
out=$root/.device
bins=(tests/transport/crescent_transport_cuda_tests tests/gpu/crescent_gpu_tests apps/crescent)

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
# Runs the GPU checks with the libraries packed beside this script.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi -L || echo "nvidia-smi: no GPU listed"
# What the bundle meets there: its libstdc++ needs glibc 2.36; a GPU in exclusive-process mode
# refuses the benchmark's second process.
getconf GNU_LIBC_VERSION
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv || true
status=0
"$here/bin/crescent_transport_cuda_tests" || status=1
"$here/bin/crescent_gpu_tests" --gtest_filter='cuda*' || status=1
# The cuda rows in full (48 rows of 5 x 0.2 s trials and their baselines: about 2 minutes).
# On this machine they must run: a skip is a failure.
"$here/bin/crescent" bench transfer --only cuda | tee "$here/bench_cuda.txt" || status=1
grep -q "skipped" "$here/bench_cuda.txt" && status=1
exit $status
RUN
chmod +x "$out/run.sh"
du -sh "$out" | awk '{print "device_bundle: " $1 " in .device (64 MiB may travel)"}'
