// `crescent bench transfer`: throughput of the transfer engine between two processes on
// loopback, over the shared-memory, TCP and cuda paths, with the baselines measured in the same
// run: single-thread memcpy (for shm), a plain TCP stream between the same two processes (for
// tcp) and single-thread cudaMemcpy within this process (for cuda: the peer's GPU region, from
// local buffers in host and in GPU memory). Prints GB/s and the ratio to the baseline for every
// case; the cuda rows print why they are skipped where there is no GPU or no CUDA.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::bench {

struct bench_transfer_options {
  double seconds_per_case = 0.2; // per trial
  uint32_t trials = 5;           // per case; rows report medians
  double warmup_seconds = 3;     // per path, untimed, before its first row
  uint64_t region_mib = 256;
  bool quick = false;            // fewer cases: one batch size, one thread count
  uint64_t slice_kib = 16384;    // the engine's slice size on copy paths (shm)
  uint64_t tcp_slice_kib = 1024; // and where TCP is the path
  uint32_t tcp_connections = 0;  // per peer; 0: the engine's default (one per two cores)
  std::string only;              // "shm", "tcp" or "cuda": that path only
  std::string cpus = "auto";     // where the two processes run (cpu_sets.hpp: choose_cpus)
  // Row filters; empty: every value of the grid (after `quick`).
  std::string op;                   // "read" or "write"
  std::vector<uint64_t> blocks_kib; // 64, 1024, 4096
  std::vector<uint32_t> batches;    // 16, 128
  std::vector<uint32_t> threads;    // 1, 2
};

int bench_transfer(const bench_transfer_options& opt);

} // namespace crescent::bench
