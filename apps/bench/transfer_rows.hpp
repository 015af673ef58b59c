// The rows of `crescent bench transfer`: for each path, the engine, the peer's region, the
// local buffer and the baseline they run against (bench_transfer.cpp measures and prints them).
#pragma once

#include "apps/bench/bench_transfer.hpp"
#include "apps/bench/peer_client.hpp"
#include "transport/device_memory.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace crescent::bench {

struct bench_case {
  transport::op_kind kind;
  uint64_t block;
  uint32_t batch;
  uint32_t threads;
};

/// The rows `opt` asks for, in the order they run: writes then reads, by block size, batch size
/// and threads; --quick keeps the first batch size and thread count, a row filter its values.
std::vector<bench_case> transfer_cases(const bench_transfer_options& opt);

// One path's rows: the engine and the peer's region they run against, the local buffer, and
// the baseline each row is scaled by.
struct path_rows {
  const char* path;
  std::shared_ptr<transport::transfer_engine> engine;
  transport::region_handle region;
  std::span<std::byte> local;
  transport::memory_location local_where;
  std::function<caf::expected<double>(const bench_case&, double seconds)> baseline;
};

// The buffers of the rows, each allocated when a path first needs it (pre-touching 1 GiB takes
// seconds here): local host memory for every path, the memcpy baseline's other end for shm, and
// for the cuda rows a local GPU buffer and a GPU target for the cudaMemcpy baseline.
struct local_buffers {
  // 1 GiB covers 2 threads x 128 ops x 4 MiB without overlap.
  static constexpr uint64_t host_bytes = 1ull << 30;

  transport::host_memory host;
  transport::host_memory scratch;
  transport::device_memory gpu;
  transport::device_memory gpu_target;

  /// Allocates `m` (one of the host buffers above) unless it already is.
  caf::error need(transport::host_memory& m);
};

/// Why this process has no cuda path (no CUDA in this binary, no GPU), or none if it has one.
caf::error why_no_cuda();

/// The rows of `path` ("shm", "tcp" or "cuda"), with their engine in steady state; an error says
/// why there are none.
caf::expected<std::vector<path_rows>> rows_of(std::string_view path, const remote_peer& peer,
                                              local_buffers& buf,
                                              const bench_transfer_options& opt);

} // namespace crescent::bench
