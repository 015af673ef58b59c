// `crescent bench store`: the KV pool (a pool-master and pool-node processes on loopback)
// against memcached and redis-server (persistence off) started in the same run. Several
// concurrent clients put, then get, values of each size; every system runs the same client loop
// (kv_client.hpp). Prints ops/s, GB/s, p50/p99 latency per system and the ratio to each
// baseline. The target (issue 4): >= 1.5x memcached's throughput for 512 KiB gets and puts.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::bench {

struct bench_store_options {
  uint32_t clients = 8; // concurrent clients, one connection each
  std::vector<uint64_t> sizes_kib = {512, 2048};
  uint64_t mib_per_phase = 256; // bytes all clients put in one phase
  // A get phase reads every value this many times: gets run ten times faster than puts, and a
  // phase of a tenth of a second measures mostly noise.
  uint32_t get_rounds = 4;
  uint32_t trials = 3; // rows report medians
  uint32_t nodes = 2;  // pool-node processes
  uint32_t replicas = 1;
  bool tcp = false;         // the pool's bytes over TCP instead of shared memory
  bool sync_commits = true; // the master fsyncs every acknowledged put
  // The pool's clients share one get_combiner (apps/pool/get_combiner.hpp): gets that are
  // concurrent go to the master in one request, as a serving process's would.
  bool combine_gets = true;
  std::string only; // "crescent": no baselines
};

int bench_store(const bench_store_options& opt);

} // namespace crescent::bench
