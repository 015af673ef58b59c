// End-to-end behaviour of the embedded cluster in simulated time: the tokens a request decodes
// after disaggregated prefill, prefix reuse and KV transfer equal one monolithic run.
#include "apps/replay/trace.hpp"
#include "gpu/cuda/cuda_devices.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "storage/block_key.hpp"
#include "support/test_cluster.hpp"

namespace crescent::testing {
namespace {

std::vector<replay::trace_record> trace_head(size_t n) {
  auto records = replay::read_trace(CRESCENT_TEST_DATA_DIR "/trace_head.jsonl", n);
  EXPECT_TRUE(records) << describe(records.error());
  return records ? *records : std::vector<replay::trace_record>{};
}

void expect_monolithic(const cluster_harness& h, const replay::synthetic_request& req,
                       const replay::request_result& res) {
  ASSERT_EQ(res.status, replay::outcome_status::completed) << res.reason;
  EXPECT_EQ(res.tokens, monolithic_tokens(h.cl->config().model, req.tokens, req.max_new_tokens))
      << "request " << req.id;
}

TEST(cluster, disaggregated_equals_monolithic_for_twenty_trace_prompts) {
  cluster_harness h{small_cluster()};
  auto w = h.workload();
  w.output_scale = 0.1; // tens of tokens each: enough steps, a fast test
  std::vector<replay::synthetic_request> reqs;
  auto records = trace_head(20);
  ASSERT_EQ(records.size(), 20u);
  for (size_t i = 0; i < records.size(); ++i)
    reqs.push_back(replay::synthesize(records[i], i, w));
  auto results = h.replay(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    expect_monolithic(h, reqs[i], results[i]);
    EXPECT_EQ(results[i].tokens.size(), reqs[i].max_new_tokens);
    EXPECT_EQ(results[i].token_times_ns.size(), results[i].tokens.size());
  }
}

// The cuda engine computes the reference engine's KV and tokens (docs/gpu.md): a cluster of it
// decodes what one monolithic reference run does, the KV streamed layer by layer included.
// Without a device the cluster does not start, and says why.
TEST(cluster, the_cuda_engine_decodes_what_the_reference_engine_does) {
  auto cfg = small_cluster();
  cfg.engine.kind = gpu::engine_kind::cuda;
  cfg.prefill.stream_min_tokens = 0;
  if (auto devices = gpu::cuda_devices(); !devices) {
    deterministic_system d;
    auto c = cluster::start(d.sys, cfg);
    ASSERT_FALSE(c) << "a cuda cluster started without a device";
    EXPECT_NE(describe(c.error()).find("CUDA"), std::string::npos) << describe(c.error());
    GTEST_SKIP() << describe(devices.error());
  }
  cluster_harness h{cfg};
  ASSERT_TRUE(h.cl);
  auto w = h.workload();
  // Built here, not read from tests/data: the device check runs this binary away from the tree.
  // Prompts of 2 to 6 blocks, some sharing prefixes (reused from the pool).
  std::vector<replay::synthetic_request> reqs;
  for (uint64_t i = 0; i < 12; ++i) {
    std::vector<uint64_t> ids;
    for (uint64_t b = 0; b < 2 + i % 5; ++b)
      ids.push_back(b < 2 ? (i % 3) * 100 + b : i * 1000 + b);
    reqs.push_back(replay::synthesize(record_of(ids, 12, 20'000 * i), i, w));
  }
  auto results = h.replay(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_monolithic(h, reqs[i], results[i]);
}

TEST(cluster, kv_streamed_layer_by_layer_equals_monolithic) {
  // Every prompt streams, a layer a step, in chunks of 40 tokens: chunks end inside pages of 16,
  // whose layers then go out with the next chunk. Some prompts share prefixes, whose cached pages
  // go out as compute begins.
  auto cfg = small_cluster();
  cfg.prefill.stream_min_tokens = 0;
  cfg.prefill.stream_layers = 1;
  cfg.prefill.chunk_tokens = 40;
  cluster_harness h{cfg};
  auto w = h.workload();
  w.output_scale = 0.1;
  std::vector<replay::synthetic_request> reqs;
  auto records = trace_head(20);
  ASSERT_EQ(records.size(), 20u);
  for (size_t i = 0; i < records.size(); ++i)
    reqs.push_back(replay::synthesize(records[i], i, w));
  reqs.push_back(replay::synthesize(record_of({1, 2, 3, 4, 5}, 6, 100'000), 20, w));
  reqs.push_back(replay::synthesize(record_of({1, 2, 3, 9}, 6, 110'000), 21, w));
  auto results = h.replay(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_monolithic(h, reqs[i], results[i]);
  EXPECT_EQ(results[21].reused_tokens, 3 * h.cl->config().model.block_tokens)
      << "the cached prefix was sent from the pool's pages";
}

TEST(cluster, shared_prefixes_are_loaded_from_the_pool) {
  cluster_harness h{small_cluster()};
  auto w = h.workload();
  // B shares A's first three blocks and arrives after A is done; C shares nothing.
  std::vector<replay::synthetic_request> reqs{
      replay::synthesize(record_of({1, 2, 3, 4, 5}, 6, 0), 0, w),
      replay::synthesize(record_of({1, 2, 3, 9, 10}, 6, 10'000), 1, w),
      replay::synthesize(record_of({20, 21, 22}, 6, 20'000), 2, w)};
  auto results = h.replay(reqs);
  for (size_t i = 0; i < reqs.size(); ++i)
    expect_monolithic(h, reqs[i], results[i]);
  const uint32_t block = h.cl->config().model.block_tokens;
  EXPECT_EQ(results[0].reused_tokens, 0u);
  EXPECT_EQ(results[1].reused_tokens, 3 * block);
  EXPECT_EQ(results[1].computed_tokens, 2 * block);
  EXPECT_EQ(results[2].reused_tokens, 0u);
  auto summary = replay::summarize(results);
  EXPECT_GT(summary.hit_rate(), 0.0);
  EXPECT_LT(summary.computed_tokens, summary.prompt_tokens);
}

TEST(cluster, blocks_read_from_another_node_count_as_remote_hits) {
  // The prefill node's own pool is small, so that most-free placement stores elsewhere.
  auto cfg = small_cluster(1, 2);
  cfg.nodes[0].pool_bytes = 64 << 10;
  cfg.pool.placement = placement_policy::most_free;
  cluster_harness h{cfg};
  auto w = h.workload();
  auto first = replay::synthesize(record_of({1, 2, 3, 4}, 2, 0), 0, w);
  auto again = replay::synthesize(record_of({1, 2, 3, 9}, 2, 10'000), 1, w);
  auto results = h.replay({first, again});
  expect_monolithic(h, first, results[0]);
  expect_monolithic(h, again, results[1]);
  const uint32_t block = h.cl->config().model.block_tokens;
  EXPECT_EQ(results[1].reused_tokens, 3 * block);
  EXPECT_EQ(results[1].remote_reused_tokens, 3 * block) << "every block came from another node";
  EXPECT_EQ(results[0].remote_reused_tokens, 0u);
  EXPECT_TRUE(results[0].pulled_from.empty());
  ASSERT_FALSE(results[1].pulled_from.empty()) << "the report names the nodes pulled from";
  for (auto n : results[1].pulled_from)
    EXPECT_TRUE(n == 1 || n == 2) << "a decode node's pool: the prefill instance is node 0's";
  EXPECT_LE(results[1].pulled_from.size(), 2u);
  if (results[1].pulled_from.size() == 2) {
    EXPECT_NE(results[1].pulled_from[0], results[1].pulled_from[1]) << "each node once";
  }
}

TEST(cluster, a_partial_last_block_is_stored_and_reused) {
  cluster_harness h{small_cluster()};
  auto w = h.workload();
  // 2.5 trace blocks: two full model blocks and a partial one of 8 tokens.
  auto r = record_of({1, 2, 3}, 4);
  r.input_tokens = 1280;
  auto first = replay::synthesize(r, 0, w);
  const uint32_t block = h.cl->config().model.block_tokens;
  ASSERT_EQ(first.tokens.size(), 2 * block + block / 2);
  auto a = h.replay({first})[0];
  expect_monolithic(h, first, a);
  EXPECT_EQ(a.reused_tokens, 0u);
  // The same prompt again: all three blocks are reused, the last token recomputed.
  auto again = replay::synthesize(r, 1, w);
  auto b = h.replay({again})[0];
  expect_monolithic(h, again, b);
  EXPECT_EQ(b.reused_tokens, first.tokens.size() - 1);
  EXPECT_EQ(b.computed_tokens, 1u);
  // A longer prompt over the same first 2.5 blocks has a full third block: only two match.
  auto longer = replay::synthesize(record_of({1, 2, 3}, 4), 2, w);
  auto c = h.replay({longer})[0];
  expect_monolithic(h, longer, c);
  EXPECT_EQ(c.reused_tokens, 2 * block);
}

TEST(cluster, a_corrupt_block_is_a_miss_and_the_suffix_is_recomputed) {
  cluster_harness h{small_cluster()};
  auto w = h.workload();
  auto first = replay::synthesize(record_of({1, 2, 3, 4, 5}, 5), 0, w);
  ASSERT_EQ(h.replay({first})[0].status, replay::outcome_status::completed);

  // Damage the stored bytes of block 2 through its handle, as a failing DIMM would.
  const auto& model = h.cl->config().model;
  auto keys = storage::chain_block_keys(first.tokens, model.block_tokens, model.key_root());
  auto query = make_envelope<wire::Get>([&](wire::Get::Builder out) {
    write_keys(out.initKeys(static_cast<unsigned>(keys.size())), keys);
    out.setPrefixOnly(true);
  });
  auto found = h.ask(h.cl->dir().store_master, get_atom::value, query);
  ASSERT_TRUE(found);
  auto handle = read_as<wire::GetReply>(*found, [](wire::GetReply::Reader in) {
    EXPECT_EQ(in.getBlocks().size(), 5u);
    EXPECT_EQ(in.getBlocks()[2].getReplicas().size(), 1u);
    return transport::from_wire(in.getBlocks()[2].getReplicas()[0]);
  });
  ASSERT_TRUE(handle);
  std::vector<std::byte> garbage(64, std::byte{0x5a});
  ASSERT_FALSE(h.cl->transfer().write(*handle, 100, garbage));

  auto again = replay::synthesize(record_of({1, 2, 3, 4, 5}, 5), 1, w);
  auto result = h.replay({again})[0];
  expect_monolithic(h, again, result);
  EXPECT_EQ(result.load_misses, 1u);
  EXPECT_EQ(result.reused_tokens, 2 * model.block_tokens);
  EXPECT_EQ(result.computed_tokens, 3 * model.block_tokens);

  // The reader reported the block; it was dropped and stored again by the recomputation.
  auto third = replay::synthesize(record_of({1, 2, 3, 4, 5}, 5), 2, w);
  auto last = h.replay({third})[0];
  expect_monolithic(h, third, last);
  EXPECT_EQ(last.load_misses, 0u);
  // Found whole: every block is reused and only the last token is computed again, for the
  // logits of the first output token.
  EXPECT_EQ(last.reused_tokens, 5 * model.block_tokens - 1);
  EXPECT_EQ(last.computed_tokens, 1u);
}

TEST(cluster, rejects_what_no_decode_instance_can_hold) {
  auto cfg = small_cluster(1, 1);
  cfg.decode.request_tokens_max = 64;
  cluster_harness h{cfg};
  auto w = h.workload();
  std::vector<replay::synthetic_request> reqs{
      replay::synthesize(record_of({1, 2, 3, 4, 5}, 100), 0, w),
      replay::synthesize(record_of({1, 2}, 4), 1, w)};
  auto results = h.replay(reqs);
  EXPECT_EQ(results[0].status, replay::outcome_status::rejected);
  EXPECT_NE(results[0].reason.find("budget"), std::string::npos) << results[0].reason;
  expect_monolithic(h, reqs[1], results[1]);
}

TEST(cluster, a_decode_instance_short_of_pages_passes_the_request_on) {
  // Each decode instance has 8 pages of 16 tokens, while the conductor counts tokens: a request
  // of 2 blocks and 8 output tokens (40 tokens) takes 3 pages. The conductor places the last
  // request on decode instance 1, which has 2 pages left; instance 0 has room. (The 3-block
  // request exceeds the per-request budget and is rejected: it shapes the conductor's choices.)
  auto cfg = small_cluster(1, 2);
  cfg.decode.kv_bytes = 8 * cfg.model.page_bytes();
  cfg.decode.request_tokens_max = 48;
  cfg.conductor.admission = admission_mode::none;
  cluster_harness h{cfg};
  auto w = h.workload();
  std::vector<replay::synthetic_request> reqs;
  const std::vector<int> blocks{1, 2, 1, 2, 3, 2};
  for (uint64_t i = 0; i < blocks.size(); ++i) {
    std::vector<uint64_t> ids;
    for (int b = 0; b < blocks[i]; ++b)
      ids.push_back(100 * (i + 1) + b);
    reqs.push_back(replay::synthesize(record_of(ids, blocks[i] == 1 ? 1 : 8), i, w));
  }
  auto results = h.replay(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  EXPECT_EQ(results[4].status, replay::outcome_status::rejected);
  EXPECT_NE(results[4].reason.find("budget"), std::string::npos) << results[4].reason;
  for (size_t i : {0, 1, 2, 3, 5})
    expect_monolithic(h, reqs[i], results[i]);
  EXPECT_EQ(results[5].decode_instance, 0u) << "instance 1 had no room for it";
}

} // namespace
} // namespace crescent::testing
