// Pool blocks stored compressed (kv_codec, issue 23 item 2): every codec stores blocks smaller
// than pages, reads them back and reuses them; int8 decodes the same tokens as no codec; a block
// whose bytes the codec does not know is a miss, never data.
#include "actors/cluster/node_spawn.hpp"
#include "actors/store_master/pool_protocol.hpp"
#include "apps/replay/trace.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "messages/schema/worker.capnp.h"
#include "storage/block_key.hpp"
#include "storage/checksum.hpp"
#include "support/test_cluster.hpp"

#include <optional>

namespace crescent::testing {
namespace {

using storage::codec::codec_kind;

cluster_config with_codec(codec_kind kind) {
  auto cfg = small_cluster();
  cfg.codec.kind = kind;
  cfg.codec.calibration_prompts = 2;
  cfg.codec.calibration_prompt_tokens = 128;
  return cfg;
}

// The replicas the store master lists for `keys`, block by block.
std::vector<std::vector<transport::region_handle>> replicas_of(cluster_harness& h,
                                                               const std::vector<block_key>& keys) {
  auto found =
      h.ask(h.cl->dir().store_master, get_atom::value, pool_protocol::make_get(keys, true));
  EXPECT_TRUE(found);
  std::vector<std::vector<transport::region_handle>> out;
  if (!found)
    return out;
  auto blocks = pool_protocol::read_get_reply(*found);
  EXPECT_TRUE(blocks);
  for (const auto& b : blocks ? *blocks : std::vector<pool_protocol::block_location>{})
    out.push_back(b.replicas);
  return out;
}

TEST(kv_codec_cluster, every_codec_stores_blocks_smaller_than_pages_and_reuses_them) {
  for (auto kind : {codec_kind::int8, codec_kind::kivi2, codec_kind::kivi4, codec_kind::kvquant3,
                    codec_kind::kvquant4}) {
    SCOPED_TRACE(storage::codec::to_string(kind));
    const auto cfg = with_codec(kind);
    cluster_harness h{cfg};
    auto w = h.workload();
    // B shares A's first three blocks and arrives after A is done.
    auto a = replay::synthesize(record_of({1, 2, 3, 4, 5}, 6, 0), 0, w);
    auto b = replay::synthesize(record_of({1, 2, 3, 9, 10}, 6, 10'000), 1, w);
    auto results = h.replay({a, b});
    ASSERT_EQ(results.size(), 2u);
    for (const auto& r : results) {
      ASSERT_EQ(r.status, replay::outcome_status::completed) << r.reason;
      EXPECT_EQ(r.tokens.size(), 6u);
    }
    const auto& m = cfg.model;
    EXPECT_EQ(results[1].reused_tokens, 3 * m.block_tokens) << "decoded from the pool";
    EXPECT_EQ(results[1].load_misses, 0u);
    auto codec = block_codec_of(cfg);
    ASSERT_TRUE(codec && *codec);
    auto keys = storage::chain_block_keys(a.tokens, m.block_tokens, m.key_root());
    auto stored = replicas_of(h, keys);
    ASSERT_EQ(stored.size(), keys.size());
    for (uint32_t i = 0; i < stored.size(); ++i) {
      ASSERT_FALSE(stored[i].empty());
      EXPECT_EQ(stored[i][0].length,
                (*codec)->block_bytes(i, m.block_tokens, i + 1 == stored.size()));
      EXPECT_LT(stored[i][0].length, m.page_bytes());
    }
  }
}

// The head of the test trace under no codec and under int8, on pools that evict nothing under
// either (so the same blocks are reused and only their bytes differ: with smaller pools int8
// keeps blocks that none evicts), with `repeats` late repeats of its first prompts, whose
// prefixes then come from the pool for certain. Per run: the results and the bytes written.
struct int8_against_none {
  std::vector<replay::request_result> runs[2];
  uint64_t written[2] = {};
};

uint64_t bytes_written(cluster_harness& h) {
  uint64_t n = 0;
  for (const auto& p : h.cl->transfer().metrics())
    n += p.bytes_written;
  return n;
}

int8_against_none run_both(size_t head, size_t repeats, const prefill_config& prefill) {
  int8_against_none out;
  auto records = replay::read_trace(CRESCENT_TEST_DATA_DIR "/trace_head.jsonl", head);
  EXPECT_TRUE(records) << describe(records.error());
  if (!records)
    return out;
  const codec_kind kinds[2] = {codec_kind::none, codec_kind::int8};
  for (int k = 0; k < 2; ++k) {
    auto cfg = with_codec(kinds[k]);
    cfg.prefill = prefill;
    for (auto& n : cfg.nodes)
      n.pool_bytes = 64ull << 20;
    cluster_harness h{cfg};
    auto w = h.workload();
    w.output_scale = 0.1;
    std::vector<replay::synthetic_request> reqs;
    for (size_t i = 0; i < records->size(); ++i)
      reqs.push_back(replay::synthesize((*records)[i], i, w));
    for (size_t i = 0; i < repeats; ++i) {
      auto again = (*records)[i];
      again.timestamp_ms += 600'000;
      reqs.push_back(replay::synthesize(again, reqs.size(), w));
    }
    out.runs[k] = h.replay(reqs);
    EXPECT_EQ(out.runs[k].size(), reqs.size());
    out.written[k] = bytes_written(h);
  }
  return out;
}

// int8 completed every request with no codec's tokens, and the prompts repeated at the end
// reused the pool's blocks.
void expect_same_tokens(const int8_against_none& both) {
  const auto& runs = both.runs;
  ASSERT_EQ(runs[0].size(), runs[1].size());
  for (size_t i = 0; i < runs[0].size(); ++i) {
    ASSERT_EQ(runs[1][i].status, replay::outcome_status::completed) << runs[1][i].reason;
    EXPECT_EQ(runs[1][i].tokens, runs[0][i].tokens) << "request " << i;
    EXPECT_EQ(runs[1][i].reused_tokens, runs[0][i].reused_tokens) << "request " << i;
  }
  EXPECT_GT(runs[1].back().reused_tokens, 0u) << "a prefix was decoded from int8 blocks";
}

// Every prompt streams, a layer a step, in chunks of 40 tokens (chunks end inside pages), and
// the cached prefix goes out whole: the decode worker decodes ranges of layers in place.
prefill_config streamed_by_layer() {
  auto prefill = small_cluster().prefill;
  prefill.stream_min_tokens = 0;
  prefill.stream_layers = 1;
  prefill.chunk_tokens = 40;
  return prefill;
}

TEST(kv_codec_cluster, int8_decodes_the_same_tokens_as_no_codec) {
  expect_same_tokens(run_both(20, 2, small_cluster().prefill));
}

TEST(kv_codec_cluster, a_streamed_hand_off_carries_blocks_and_decodes_the_same_tokens) {
  const auto both = run_both(12, 1, streamed_by_layer());
  expect_same_tokens(both);
  // int8 blocks are about a quarter of float32 pages, on the hand-off and into the pool.
  EXPECT_LT(both.written[1] * 3, both.written[0])
      << both.written[1] << " against " << both.written[0];
}

TEST(kv_codec_cluster, a_prefill_group_hands_off_each_stages_layers_as_blocks) {
  // Two instances share the model's two layers (CPP): each stage sends its own layer of every
  // page as a block of its own, and the head the cached prefix's pages whole.
  auto prefill = streamed_by_layer();
  prefill.group_instances = 2;
  const auto both = run_both(12, 1, prefill);
  expect_same_tokens(both);
  // Less, not a quarter: a stage's layers also go to its head as they are (for the pool), and
  // the residual streams between stages are not KV.
  EXPECT_LT(both.written[1], both.written[0]);
}

TEST(kv_codec_cluster, compressed_blocks_go_to_ssd_and_come_back) {
  // One prefill node whose DRAM holds about 16 kvquant4 blocks (of some 2 KiB against 8 KiB
  // pages), with an SSD: five prompts of five blocks push the first one's blocks to SSD; read
  // again, they are promoted and decoded.
  auto cfg = with_codec(codec_kind::kvquant4);
  cfg.nodes = {{1, 0, 32u << 10}, {0, 1, 4u << 20}};
  cfg.nodes[0].ssd_bytes = 4u << 20;
  cfg.pool.lease_ttl_ms = 1;
  cluster_harness h{cfg};
  auto w = h.workload();
  std::vector<replay::synthetic_request> reqs;
  for (uint64_t p = 0; p < 5; ++p)
    reqs.push_back(replay::synthesize(
        record_of({10 * p + 1, 10 * p + 2, 10 * p + 3, 10 * p + 4, 10 * p + 5}, 4, 1000 * p), p,
        w));
  reqs.push_back(replay::synthesize(record_of({1, 2, 3, 4, 5}, 4, 60'000), 5, w));
  auto results = h.replay(reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (const auto& r : results)
    ASSERT_EQ(r.status, replay::outcome_status::completed) << r.reason;
  auto stat = [&](auto f) {
    auto reply = h.ask(h.cl->dir().block_owners[0], stats_atom::value);
    EXPECT_TRUE(reply);
    return reply ? *read_as<wire::OwnerStats>(*reply, f) : uint64_t{0};
  };
  EXPECT_GT(stat([](wire::OwnerStats::Reader in) { return in.getOffloads(); }), 0u);
  EXPECT_GT(stat([](wire::OwnerStats::Reader in) { return in.getPromotions(); }), 0u);
  // The oldest blocks went to SSD first; what the get could promote (DRAM is nearly full of the
  // other prompts' blocks) was read and decoded, none a miss.
  EXPECT_GE(results[5].reused_tokens, cfg.model.block_tokens);
  EXPECT_EQ(results[5].load_misses, 0u);
}

TEST(kv_codec_cluster, without_handoff_the_pages_go_as_they_are) {
  auto cfg = with_codec(codec_kind::kivi2);
  cfg.codec.handoff = false;
  cluster_harness h{cfg};
  auto w = h.workload();
  auto a = replay::synthesize(record_of({1, 2, 3, 4}, 4), 0, w);
  auto r = h.replay({a})[0];
  ASSERT_EQ(r.status, replay::outcome_status::completed) << r.reason;
  EXPECT_EQ(r.tokens, monolithic_tokens(cfg.model, a.tokens, a.max_new_tokens))
      << "the decode worker computes on the prefill's very KV";
}

TEST(kv_codec_cluster, a_block_the_codec_does_not_know_is_a_miss) {
  const auto cfg = with_codec(codec_kind::int8);
  cluster_harness h{cfg};
  auto w = h.workload();
  const auto& m = cfg.model;
  auto first = replay::synthesize(record_of({1, 2, 3}, 4), 0, w);
  auto keys = storage::chain_block_keys(first.tokens, m.block_tokens, m.key_root());
  // Block 0 is put by hand before any request, by one client (the master takes a commit only
  // from the writer it granted): bytes of the right checksum that are no codec's.
  const std::vector<block_key> key{keys[0]};
  const std::vector<uint64_t> size{200};
  const std::vector<uint32_t> position{0};
  const std::vector<std::byte> garbage(200, std::byte{0x5a});
  const std::vector<uint64_t> sum{storage::block_checksum(garbage)};
  auto put = pool_protocol::make_put_start(
      {0, 1, wire::ReplicaPlacement::LOCAL_FIRST, key, size, position});
  auto commit = pool_protocol::make_put_commit(key, sum);
  auto done = std::make_shared<std::optional<caf::error>>();
  auto master = h.cl->dir().store_master;
  auto* transfer = &h.cl->transfer();
  h.sys.spawn([=](caf::event_based_actor* client) {
    client->request(master, caf::infinite, put_start_atom::value, put)
        .then(
            [=](const typed_envelope<wire::PutStartReply>& reply) {
              auto slots = pool_protocol::read_put_start_reply(reply);
              if (!slots || slots->size() != 1 || (*slots)[0].replicas.size() != 1) {
                *done = make_error(errc::internal, "no slot for the block");
                return;
              }
              if (auto err = transfer->write((*slots)[0].replicas[0], 0, garbage)) {
                *done = err;
                return;
              }
              client->request(master, caf::infinite, put_commit_atom::value, commit)
                  .then([=]() { *done = caf::error{}; },
                        [=](caf::error& err) { *done = std::move(err); });
            },
            [=](caf::error& err) { *done = std::move(err); });
  });
  ASSERT_TRUE(h.run_until([&] { return done->has_value(); }));
  ASSERT_FALSE(**done) << describe(**done);

  auto r = h.replay({first})[0];
  ASSERT_EQ(r.status, replay::outcome_status::completed) << r.reason;
  EXPECT_EQ(r.tokens, monolithic_tokens(m, first.tokens, first.max_new_tokens))
      << "the garbage was never used as KV";
  EXPECT_EQ(r.reused_tokens, 0u);
  EXPECT_EQ(r.load_misses, 1u) << "counted as a miss";
  uint64_t codec_errors = 0;
  for (const auto& worker : h.cl->dir().prefill) {
    auto stats = h.ask(worker, stats_atom::value);
    ASSERT_TRUE(stats);
    codec_errors += *read_as<wire::WorkerStats>(
        *stats, [](wire::WorkerStats::Reader in) { return in.getCodecErrors(); });
  }
  EXPECT_EQ(codec_errors, 1u) << "and as a block the codec refused (crescent serve's /metrics)";
}

} // namespace
} // namespace crescent::testing
