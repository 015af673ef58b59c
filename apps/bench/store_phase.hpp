// One timed phase of `crescent bench store`: every client thread puts (or gets) its share of
// values at once; latencies of single operations and the phase's wall time.
#pragma once

#include "apps/bench/kv_client.hpp"

#include <vector>

namespace crescent::bench {

struct phase_result {
  double seconds = 0;
  uint64_t ops = 0;    // succeeded
  uint64_t bytes = 0;  // of succeeded operations
  uint64_t misses = 0; // gets that found nothing (a bad value counts as wrong, below)
  uint64_t wrong = 0;  // gets that returned other bytes than were put
  uint64_t errors = 0;
  std::string first_error;
  double p50_us = 0;
  double p99_us = 0;
};

/// Client c handles keys key_base + c * ops_per_client + [0, ops_per_client), `rounds` times
/// over. The value of a key is a pseudo-random buffer fixed by the value size, stamped with the
/// key at both ends, so a get can tell a value of another key from its own.
phase_result run_phase(std::vector<std::unique_ptr<kv_client>>& clients, bool put,
                       uint64_t value_bytes, uint64_t ops_per_client, uint64_t key_base,
                       uint32_t rounds = 1);

} // namespace crescent::bench
