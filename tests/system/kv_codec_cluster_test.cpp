// Pool blocks stored compressed (kv_codec, issue 23 item 2): every codec stores blocks smaller
// than pages, reads them back and reuses them; int8 decodes the same tokens as no codec; a block
// whose bytes the codec does not know is a miss, never data.
#include "actors/cluster/node_spawn.hpp"
#include "actors/store_master/pool_protocol.hpp"
#include "apps/replay/trace.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
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
                                                               const std::vector<uint64_t>& keys) {
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
    auto keys = storage::chain_block_keys(a.tokens, m.block_tokens, m.fingerprint());
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

TEST(kv_codec_cluster, int8_decodes_the_same_tokens_as_no_codec) {
  auto records = replay::read_trace(CRESCENT_TEST_DATA_DIR "/trace_head.jsonl", 20);
  ASSERT_TRUE(records) << describe(records.error());
  std::vector<replay::request_result> runs[2];
  const codec_kind kinds[2] = {codec_kind::none, codec_kind::int8};
  for (int k = 0; k < 2; ++k) {
    // Pools that evict nothing under either: the same blocks are reused, only their bytes
    // differ (with smaller pools int8 keeps blocks that none evicts: more reuse, other timing).
    auto cfg = with_codec(kinds[k]);
    for (auto& n : cfg.nodes)
      n.pool_bytes = 64ull << 20;
    cluster_harness h{cfg};
    auto w = h.workload();
    w.output_scale = 0.1;
    std::vector<replay::synthetic_request> reqs;
    for (size_t i = 0; i < records->size(); ++i)
      reqs.push_back(replay::synthesize((*records)[i], i, w));
    // Two late repeats of the first prompts: their prefixes come from the pool for certain.
    for (size_t i = 0; i < 2; ++i) {
      auto again = (*records)[i];
      again.timestamp_ms += 600'000;
      reqs.push_back(replay::synthesize(again, 20 + i, w));
    }
    runs[k] = h.replay(reqs);
    ASSERT_EQ(runs[k].size(), reqs.size());
  }
  uint64_t reused = 0;
  for (size_t i = 0; i < runs[0].size(); ++i) {
    ASSERT_EQ(runs[1][i].status, replay::outcome_status::completed) << runs[1][i].reason;
    EXPECT_EQ(runs[1][i].tokens, runs[0][i].tokens) << "request " << i;
    EXPECT_EQ(runs[1][i].reused_tokens, runs[0][i].reused_tokens) << "request " << i;
    reused += runs[1][i].reused_tokens;
  }
  EXPECT_GT(reused, 0u) << "some prefixes were decoded from int8 blocks";
}

TEST(kv_codec_cluster, a_block_the_codec_does_not_know_is_a_miss) {
  const auto cfg = with_codec(codec_kind::int8);
  cluster_harness h{cfg};
  auto w = h.workload();
  const auto& m = cfg.model;
  auto first = replay::synthesize(record_of({1, 2, 3}, 4), 0, w);
  auto keys = storage::chain_block_keys(first.tokens, m.block_tokens, m.fingerprint());
  // Block 0 is put by hand before any request, by one client (the master takes a commit only
  // from the writer it granted): bytes of the right checksum that are no codec's.
  const std::vector<uint64_t> key{keys[0]};
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
            [=](const envelope& reply) {
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
}

} // namespace
} // namespace crescent::testing
