// `crescent bench gpu` (issue 22): the device engine against the CPU reference engine in the
// same run, and KV page gathers and scatters against a plain copy within the device.
//
// Engine: the same model (weights from the seed) on both engines; `prompts` prompts of
// `prompt_tokens` tokens prefilled in chunks of `chunk_tokens`, then `decode_steps` decode steps
// of all of them together. Prefill and decode tokens per second of each engine (wall time of the
// calls; the reference engine runs on one core), their ratio, and whether every greedy token and
// every KV byte is the same (the device engine computes the reference's floats exactly:
// gpu/cuda/device_engine.hpp), and whether a second device run gives the same bytes (run to run
// determinism). A difference is a failure.
//
// Pages (CUDA only): `pages` pages of the model's page size scattered over device memory,
// gathered into one buffer and scattered back (gpu/cuda/kv_pages.hpp), in GB/s against
// cudaMemcpy of the same bytes within the device; medians of rounds. Target: at least 0.8x.
//
// Without a CUDA device it prints why and stops (exit 0); `--host-emulation` runs the engine
// part on the device engine's host emulation instead, to try the benchmark on any machine.
#pragma once

#include <cstdint>

namespace crescent::bench {

struct bench_gpu_options {
  int device = 0;
  bool host_emulation = false;
  uint32_t prompts = 8;
  uint32_t prompt_tokens = 1024;
  uint32_t chunk_tokens = 512;
  uint32_t decode_steps = 32;
  uint32_t pages = 4096;
  uint32_t rounds = 20;
  // The model: the reference engine's structure at a size where a GPU has work to do.
  uint32_t layers = 4;
  uint32_t d_model = 512;
  uint32_t heads = 8;
  uint32_t kv_heads = 2;
  uint32_t ffn = 1376;
  uint32_t vocab = 2048;
  uint32_t block_tokens = 16;
  uint64_t seed = 1;
};

/// Runs the benchmark and prints its table; 0 on success (or no device), 1 if the engines
/// disagree or a device call fails, 2 for options outside the limits.
int bench_gpu(const bench_gpu_options& options);

} // namespace crescent::bench
