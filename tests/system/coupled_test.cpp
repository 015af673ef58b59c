// Coupled instances (the vLLM-style baseline, docs/coupled.md) in simulated time on the reference
// engine: the tokens equal a monolithic run in every mode, prefix caching shares pages, and a
// long prefill stalls the other requests' decodes unless it is chunked.
#include "apps/replay/trace.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/worker.capnp.h"
#include "support/test_cluster.hpp"

#include <algorithm>

namespace crescent::testing {
namespace {

struct coupled_mode {
  const char* name;
  bool chunked;
  bool caching;
};

// `instances` coupled instances, one a node, each with KV memory for `kv_pages` pages.
cluster_config coupled_cluster(uint32_t instances, coupled_mode mode, uint32_t kv_pages = 256) {
  auto cfg = small_cluster(1, 1);
  cfg.nodes.assign(instances, node_config{0, 0, 1ull << 20});
  for (auto& n : cfg.nodes)
    n.coupled_instances = 1;
  cfg.coupled.kv_tokens = uint64_t{kv_pages} * cfg.model.block_tokens;
  cfg.coupled.chunked_prefill = mode.chunked;
  cfg.coupled.prefix_caching = mode.caching;
  cfg.coupled.batch_max = 8;
  // Chunks of at most 40 tokens: they end inside pages of 16 tokens.
  cfg.coupled.token_budget = mode.chunked ? 48 : 0;
  cfg.conductor.policy = mode.caching ? policy_kind::local_cache_aware : policy_kind::least_loaded;
  cfg.conductor.admission = admission_mode::none;
  return cfg;
}

void expect_monolithic(const cluster_harness& h, const replay::synthetic_request& req,
                       const replay::request_result& res) {
  ASSERT_EQ(res.status, replay::outcome_status::completed) << res.reason;
  EXPECT_EQ(res.tokens, monolithic_tokens(h.cl->config().model, req.tokens, req.max_new_tokens))
      << "request " << req.id;
}

class coupled_modes : public ::testing::TestWithParam<coupled_mode> {};

TEST_P(coupled_modes, tokens_equal_a_monolithic_run) {
  cluster_harness h{coupled_cluster(2, GetParam())};
  auto w = h.workload();
  w.output_scale = 0.1;
  auto records = replay::read_trace(CRESCENT_TEST_DATA_DIR "/trace_head.jsonl", 16);
  ASSERT_TRUE(records) << describe(records.error());
  std::vector<replay::synthetic_request> reqs;
  for (size_t i = 0; i < records->size(); ++i)
    reqs.push_back(replay::synthesize((*records)[i], i, w));
  // Shared prefixes, arriving while the first is still running and after it ended.
  reqs.push_back(replay::synthesize(record_of({1, 2, 3, 4, 5}, 12, 0), 16, w));
  reqs.push_back(replay::synthesize(record_of({1, 2, 3, 9}, 6, 1), 17, w));
  reqs.push_back(replay::synthesize(record_of({1, 2, 3, 4, 5}, 6, 200'000), 18, w));
  auto results = h.replay(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    expect_monolithic(h, reqs[i], results[i]);
    EXPECT_EQ(results[i].prefill_instance, results[i].decode_instance);
  }
  const uint32_t block = h.cl->config().model.block_tokens;
  if (GetParam().caching) {
    EXPECT_EQ(results[18].reused_tokens, 4 * block)
        << "found whole, its last block is computed again: a shared page is never written";
    EXPECT_EQ(results[18].computed_tokens, block);
  } else {
    EXPECT_EQ(results[18].reused_tokens, 0u);
  }
}

INSTANTIATE_TEST_SUITE_P(all, coupled_modes,
                         ::testing::Values(coupled_mode{"prefill_first", false, false},
                                           coupled_mode{"chunked", true, false},
                                           coupled_mode{"prefix_caching", false, true},
                                           coupled_mode{"chunked_prefix_caching", true, true}),
                         [](const auto& info) { return std::string{info.param.name}; });

TEST(coupled, a_cached_prefix_is_shared_on_the_instance_that_holds_it) {
  cluster_harness h{coupled_cluster(2, {"caching", false, true})};
  auto w = h.workload();
  // B shares A's first three blocks and comes after A ended; local_cache_aware sends it to A's
  // instance. C shares nothing.
  std::vector<replay::synthetic_request> reqs{
      replay::synthesize(record_of({1, 2, 3, 4, 5}, 6, 0), 0, w),
      replay::synthesize(record_of({1, 2, 3, 9, 10}, 6, 100'000), 1, w),
      replay::synthesize(record_of({20, 21, 22}, 6, 200'000), 2, w)};
  auto results = h.replay(reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_monolithic(h, reqs[i], results[i]);
  const uint32_t block = h.cl->config().model.block_tokens;
  EXPECT_EQ(results[1].prefill_instance, results[0].prefill_instance);
  EXPECT_EQ(results[1].reused_tokens, 3 * block);
  EXPECT_EQ(results[1].computed_tokens, 2 * block);
  EXPECT_EQ(results[2].reused_tokens, 0u);
}

// The longest interval between two of `r`'s tokens.
int64_t longest_interval_ns(const replay::request_result& r) {
  int64_t out = 0;
  for (size_t i = 1; i < r.token_times_ns.size(); ++i)
    out = std::max(out, r.token_times_ns[i] - r.token_times_ns[i - 1]);
  return out;
}

TEST(coupled, a_long_prefill_stalls_decodes_unless_it_is_chunked) {
  // A decodes 400 tokens; B's prompt of 20 blocks comes while it does. Prefill first, A's decodes
  // wait for B's whole prefill; chunked, each step carries a decode of A and a chunk of B.
  auto run = [](bool chunked) {
    cluster_harness h{coupled_cluster(1, {"one", chunked, false})};
    auto w = h.workload();
    std::vector<uint64_t> ids;
    for (uint64_t b = 0; b < 20; ++b)
      ids.push_back(100 + b);
    std::vector<replay::synthetic_request> reqs{replay::synthesize(record_of({1}, 400, 0), 0, w),
                                                replay::synthesize(record_of(ids, 2, 1), 1, w)};
    auto results = h.replay(reqs);
    for (size_t i = 0; i < reqs.size(); ++i)
      expect_monolithic(h, reqs[i], results[i]);
    return results;
  };
  const auto first = run(false);
  const auto chunked = run(true);
  // Prefill first: one of A's intervals holds all of B's prefill time.
  EXPECT_GE(longest_interval_ns(first[0]), static_cast<int64_t>(first[1].prefill_compute_ns));
  // Chunked: no interval of A comes near it, while B's prefill takes longer (it shares steps).
  EXPECT_LT(longest_interval_ns(chunked[0]) * 4, longest_interval_ns(first[0]));
  EXPECT_GT(chunked[1].prefill_compute_ns, first[1].prefill_compute_ns);
}

TEST(coupled, a_request_waits_for_memory_and_a_released_one_frees_its_pages) {
  // 12 pages: A (3 blocks and 80 outputs: 8 pages) runs; B (2 blocks and 40: 5 pages) waits for
  // A's.
  auto cfg = coupled_cluster(1, {"small", false, false}, 12);
  cluster_harness h{cfg};
  auto w = h.workload();
  std::vector<replay::synthetic_request> reqs{replay::synthesize(record_of({1, 2, 3}, 80, 0), 0, w),
                                              replay::synthesize(record_of({7, 8}, 40, 1), 1, w)};
  auto results = h.replay(reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_monolithic(h, reqs[i], results[i]);
  EXPECT_GE(results[1].token_times_ns.front(), results[0].token_times_ns.back())
      << "B was admitted only once A's pages came back";
  auto stats = h.ask(h.cl->dir().coupled[0], stats_atom::value);
  ASSERT_TRUE(stats);
  auto free_pages = read_as<wire::WorkerStats>(
      *stats, [](wire::WorkerStats::Reader in) { return in.getFreePages(); });
  EXPECT_EQ(free_pages, caf::expected<uint32_t>{12u});
}

TEST(coupled, a_request_larger_than_the_instance_is_rejected_and_the_rest_served) {
  cluster_harness h{coupled_cluster(1, {"small", false, false}, 4)};
  auto w = h.workload();
  std::vector<replay::synthetic_request> reqs{
      replay::synthesize(record_of({1, 2, 3, 4, 5}, 8, 0), 0, w),
      replay::synthesize(record_of({7}, 4, 1), 1, w)};
  auto results = h.replay(reqs);
  EXPECT_EQ(results[0].status, replay::outcome_status::rejected);
  EXPECT_NE(results[0].reason.find("KV pages"), std::string::npos) << results[0].reason;
  expect_monolithic(h, reqs[1], results[1]);
}

} // namespace
} // namespace crescent::testing
