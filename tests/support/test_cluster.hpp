// A Crescent cluster on the deterministic scheduler, with helpers to replay requests through it
// and to compute the same requests monolithically on the reference engine.
#pragma once

#include "actors/cluster/cluster.hpp"
#include "apps/replay/replay_driver.hpp"
#include "apps/replay/trace.hpp"
#include "apps/replay/workload.hpp"
#include "support/deterministic.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace crescent::testing {

/// A small cluster in simulated time: modeled engine timing, workers advancing the virtual
/// clock by it, fixed access keys, unsynced metadata in a temporary directory.
inline cluster_config small_cluster(uint32_t prefill = 2, uint32_t decode = 2) {
  cluster_config cfg;
  cfg.nodes.clear();
  for (uint32_t i = 0; i < prefill; ++i)
    cfg.nodes.push_back({1, 0, 4ull << 20});
  for (uint32_t i = 0; i < decode; ++i)
    cfg.nodes.push_back({0, 1, 4ull << 20});
  cfg.model.context_tokens_max = 4096;
  cfg.decode.kv_bytes = 16ull << 20;
  cfg.decode.request_tokens_max = 4096;
  cfg.prefill.chunk_tokens = 64;
  cfg.engine.timing = gpu::timing_mode::modeled;
  cfg.simulated_time = true;
  cfg.store.sync_commits = false;
  cfg.access_key_seed = 1234;
  return cfg;
}

/// A trace record of whole blocks `ids` (of the trace's 512 tokens each).
inline replay::trace_record record_of(std::vector<uint64_t> ids, uint32_t output_tokens,
                                      uint64_t timestamp_ms = 0) {
  replay::trace_record r;
  r.timestamp_ms = timestamp_ms;
  r.input_tokens = static_cast<uint32_t>(ids.size() * replay::trace_block_tokens);
  r.output_tokens = output_tokens;
  r.hash_ids = std::move(ids);
  return r;
}

class cluster_harness : public deterministic_system {
 public:
  explicit cluster_harness(const cluster_config& cfg) {
    auto c = cluster::start(sys, cfg);
    if (!c)
      ADD_FAILURE() << describe(c.error());
    else
      cl = std::move(*c);
  }

  ~cluster_harness() {
    if (cl)
      cl->stop();
    sched.run();
  }

  /// Replays `requests` (arrival times relative to now) and returns their results in id order.
  std::vector<replay::request_result> replay(std::vector<replay::synthetic_request> requests) {
    auto results = std::make_shared<std::vector<replay::request_result>>();
    const size_t n = requests.size();
    auto driver = replay::spawn_replay_driver(sys, *cl, std::move(requests), results);
    caf::anon_send(driver, run_atom::value);
    EXPECT_TRUE(run_until([&] { return results->size() == n; }));
    auto out = *results;
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
    return out;
  }

  replay::workload_options workload() const {
    replay::workload_options w;
    w.block_tokens = cl->config().model.block_tokens;
    w.vocab = cl->config().model.vocab;
    return w;
  }

  std::unique_ptr<cluster> cl;
};

/// The tokens a request decodes when its whole prompt is prefilled in one call and decoded
/// alone: the reference every disaggregated run must match exactly.
std::vector<uint32_t> monolithic_tokens(const gpu::model_config& model,
                                        const std::vector<uint32_t>& prompt,
                                        uint32_t max_new_tokens);

} // namespace crescent::testing
