// The baselines of `crescent bench store`, started in the same run on loopback: memcached, and
// redis-server with persistence off. Each is a child process on a free port; clients connect
// through the servers' own client libraries (libmemcached, hiredis) where they were found at
// build time.
#pragma once

#include "apps/bench/child_process.hpp"
#include "apps/bench/kv_client.hpp"

#include <optional>

namespace crescent::bench {

struct baseline_server {
  std::string name; // "memcached" or "redis"
  uint16_t port = 0;
  std::optional<child_process> process;
  kv_client_factory connect;
};

/// Starts memcached with room for `memory_mib` and values up to `value_bytes_max`; an error
/// says why it cannot (not installed, not built with libmemcached, did not come up).
caf::expected<baseline_server> start_memcached(uint64_t memory_mib, uint64_t value_bytes_max);

/// Starts redis-server without persistence (no RDB snapshots, no append-only file).
caf::expected<baseline_server> start_redis(uint64_t memory_mib);

} // namespace crescent::bench
