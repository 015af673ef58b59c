// Placement policies on hand-built views, with exact expected choices (docs/scheduling.md).
#include "actors/conductor/conductor_state.hpp"
#include "actors/conductor/estimate.hpp"
#include "actors/conductor/policy.hpp"
#include "support/block_keys.hpp"
#include "support/simple_time_model.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

namespace crescent {
namespace {

TEST(prefix_index, counts_leading_blocks_per_node) {
  prefix_index idx;
  idx.add(1_key, 0);
  idx.add(2_key, 0);
  idx.add(1_key, 3);
  std::vector<block_key> keys = numbered_keys({1, 2, 3});
  EXPECT_EQ(idx.cached_prefix(keys, 0), 2u);
  EXPECT_EQ(idx.cached_prefix(keys, 3), 1u);
  EXPECT_EQ(idx.cached_prefix(keys, 1), 0u);
  auto m = idx.match(keys);
  EXPECT_EQ(m.length[0], 2u);
  EXPECT_EQ(m.length[3], 1u);
  EXPECT_EQ(m.length[1], 0u);
  EXPECT_EQ(m.best, 2u);
  EXPECT_EQ(m.best_node, 0u);
  idx.remove_node(0);
  EXPECT_EQ(idx.cached_prefix(keys, 0), 0u);
  EXPECT_EQ(idx.size(), 1u);
  EXPECT_EQ(idx.match(keys).best_node, 3u);
}

TEST(prefix_index, nodes_past_the_first_64_are_held_apart) {
  // Node ids in every word of the set: 63 and 64 sit on either side of a word's edge.
  prefix_index idx;
  for (uint32_t node : {63u, 64u, 130u, 255u})
    idx.add(1_key, node);
  idx.add(2_key, 64);
  idx.add(2_key, 255);
  idx.add(3_key, 255);
  std::vector<block_key> keys = numbered_keys({1, 2, 3});
  auto m = idx.match(keys);
  EXPECT_EQ(m.length[63], 1u);
  EXPECT_EQ(m.length[64], 2u);
  EXPECT_EQ(m.length[130], 1u);
  EXPECT_EQ(m.length[255], 3u);
  EXPECT_EQ(m.length[0], 0u);
  EXPECT_EQ(m.best, 3u);
  EXPECT_EQ(m.best_node, 255u);
  EXPECT_EQ(idx.cached_prefix(keys, 64), 2u);
  idx.remove(3_key, 255);
  idx.remove_node(64);
  m = idx.match(keys);
  EXPECT_EQ(m.length[64], 0u);
  EXPECT_EQ(m.best, 2u);
  EXPECT_EQ(m.best_node, 255u);
}

TEST(prefix_index, blocks_on_ssd_tiers_extend_each_nodes_prefix_and_are_counted_apart) {
  for (uint32_t base : {0u, 100u}) { // the narrow form, then the wide one
    prefix_index dram, ssd;
    dram.add(1_key, base);
    ssd.add(2_key, base);
    ssd.add(3_key, base);
    dram.add(3_key, base); // read back since: in DRAM again, and still on the drive
    dram.add(1_key, base + 1);
    dram.add(2_key, base + 1);
    ssd.add(1_key, base + 2);
    std::vector<block_key> keys = numbered_keys({1, 2, 3, 4});
    auto m = dram.match(keys, &ssd);
    EXPECT_EQ(m.length[base], 3u) << base;
    EXPECT_EQ(m.on_ssd[base], 1u) << "key 2 only; key 3 is in DRAM too";
    EXPECT_EQ(m.length[base + 1], 2u);
    EXPECT_EQ(m.on_ssd[base + 1], 0u);
    EXPECT_EQ(m.length[base + 2], 1u);
    EXPECT_EQ(m.on_ssd[base + 2], 1u);
    EXPECT_EQ(m.best, 3u);
    EXPECT_EQ(m.best_node, base);
    // Without the SSD index (or with an empty one), DRAM alone.
    const prefix_index empty;
    for (const auto* none : {&empty, static_cast<const prefix_index*>(nullptr)}) {
      m = dram.match(keys, none);
      EXPECT_EQ(m.length[base], 1u);
      EXPECT_EQ(m.on_ssd[base], 0u);
      EXPECT_EQ(m.best_node, base + 1);
    }
  }
}

TEST(node_set, holds_every_id_below_its_capacity_in_order) {
  node_set s;
  EXPECT_TRUE(s.empty());
  for (uint32_t n : {255u, 0u, 64u, 63u, 128u})
    s.insert(n);
  std::vector<uint32_t> seen;
  s.for_each([&](uint32_t n) { seen.push_back(n); });
  EXPECT_EQ(seen, (std::vector<uint32_t>{0, 63, 64, 128, 255}));
  EXPECT_EQ(s.size(), 5u);
  EXPECT_TRUE(s.contains(128));
  EXPECT_FALSE(s.contains(127));
  EXPECT_FALSE(s.contains(256)) << "past the capacity: never held";
  auto round = node_set::from_words(std::span<const uint64_t, node_set::words>{s.to_words()});
  EXPECT_EQ(round, s);
  node_set other;
  other.insert(64);
  EXPECT_EQ(s.without(other).size(), 4u);
  s &= other;
  EXPECT_EQ(s, other);
}

time_model simple_model() {
  return testing::simple_time_model();
}

constexpr uint64_t local_block_ns = 8192;   // 8,192 bytes at 1 GB/s
constexpr uint64_t remote_block_ns = 16384; // at 0.5 GB/s

struct cluster_state {
  prefix_index index;
  time_model model = simple_model();
  std::vector<prefill_view> prefill{{0, true, 0, 0, 0}, {1, true, 0, 0, 0}};
  std::vector<std::vector<decode_load>> loads{{}, {}};
  std::vector<decode_view> decode{{10, true, 1'000'000, {}}, {11, true, 1'000'000, {}}};
  schedule_view view() {
    for (size_t i = 0; i < decode.size(); ++i)
      decode[i].requests = loads[i];
    schedule_view v;
    v.prefill = prefill;
    v.decode = decode;
    v.index = &index;
    v.model = &model;
    v.admission = admission_mode::none;
    v.block_tokens = 16;
    return v;
  }
};

// A prompt of 64 tokens: 4 blocks, keys 1..4.
const std::vector<block_key> four_keys = numbered_keys({1, 2, 3, 4});
request_view four_blocks() {
  return {64, 8, four_keys};
}

void hold(prefix_index& idx, uint32_t node, size_t blocks) {
  for (size_t i = 0; i < blocks; ++i)
    idx.add(four_keys[i], node);
}

TEST(time_model, fits_the_engine_and_predicts_loads_and_hand_offs) {
  auto m = simple_model();
  EXPECT_LT(m.fit_error(), 1e-6);
  EXPECT_EQ(m.prefill_ns(64, 0), 64'000u);
  EXPECT_EQ(m.prefill_ns(64, 48), 16'000u);
  EXPECT_EQ(m.prefill_ns(64, 64), 1'000u) << "the last token is always computed";
  EXPECT_EQ(m.load_ns(3, false), 3 * local_block_ns);
  EXPECT_EQ(m.load_ns(3, true), 3 * remote_block_ns);
  EXPECT_EQ(m.handoff_ns(64), 4 * remote_block_ns);
  EXPECT_EQ(m.decode_step_ns(3, 100), 3'000'000u);
  m.correct(1000, 2000); // twice as slow as predicted, once: a step of 1/32 towards it
  EXPECT_NEAR(m.correction(), 1 + 1.0 / 32, 1e-9);
}

TEST(time_model, a_streamed_hand_off_hides_behind_the_prefix_load_after_its_first_batch) {
  auto m = simple_model(); // 1 us a token, chunks of 128, pages of 16 tokens, 2 layers
  m.set_streaming(16, 1, 2, 8);
  // 1,024 tokens: 64 pages at 16,384 ns each over the NIC. 48 cached blocks load in 8 batches
  // of 6; the hand-off waits for the first, then overlaps the other 7 and the compute.
  const uint64_t send = 64 * remote_block_ns;
  const uint64_t load = 48 * local_block_ns;
  const uint64_t compute = m.prefill_ns(1024, 768);
  ASSERT_EQ(compute, 256'000u);
  EXPECT_EQ(m.handoff_ns(1024, compute, load, 48), send - compute - load * 42 / 48);
  EXPECT_EQ(m.handoff_ns(1024, compute), send - compute) << "nothing loaded: the compute only";
  // All of it hidden: what goes after the last step is its layer (1 of 2) of the last chunk's
  // pages, 128 tokens after the 768 reused: pages 56 to 63.
  EXPECT_EQ(m.handoff_ns(1024, 10 * send, load, 48), 8 * remote_block_ns / 2);
  // Sent after prefill (shorter than the streaming threshold): all of it.
  EXPECT_EQ(m.handoff_ns(15, compute, load, 1), remote_block_ns);
}

TEST(time_model, a_first_batch_bounded_in_blocks_lets_the_hand_off_start_sooner) {
  auto m = simple_model();
  m.set_streaming(16, 1, 2, 8, 2); // batches of at most 2 blocks
  // As above, but the hand-off waits for a first batch of 2 of the 48 blocks, not 6.
  const uint64_t send = 64 * remote_block_ns;
  const uint64_t load = 48 * local_block_ns;
  const uint64_t compute = m.prefill_ns(1024, 768);
  EXPECT_EQ(m.handoff_ns(1024, compute, load, 48), send - compute - load * 46 / 48);
  m.set_streaming(16, 1, 2, 8, 6); // a bound the 8 batches stay under: as without one
  EXPECT_EQ(m.handoff_ns(1024, compute, load, 48), send - compute - load * 42 / 48);
}

TEST(time_model, a_hand_off_crowds_the_nic_at_its_end_for_its_last_step_unless_the_link_holds_it) {
  auto m = simple_model();
  m.set_streaming(16, 1, 2, 8);
  const uint64_t send = 64 * remote_block_ns;
  const uint64_t load = 48 * local_block_ns;
  const uint64_t compute = m.prefill_ns(1024, 768);
  // Held back by the link (its tail is more than a last step): all of its pages, back to back.
  auto h = m.handoff(1024, compute, load, 48);
  EXPECT_EQ(h.tail_ns, send - compute - load * 42 / 48);
  EXPECT_EQ(h.burst_ns, send);
  // Hidden behind a long compute: only the last step comes at once.
  h = m.handoff(1024, 10 * send, load, 48);
  EXPECT_EQ(h.burst_ns, 8 * remote_block_ns / 2);
  EXPECT_EQ(h.burst_ns, h.tail_ns);
  // Sent after prefill: all of it, after the compute.
  h = m.handoff(15, compute, load, 1);
  EXPECT_EQ(h.burst_ns, remote_block_ns);
}

TEST(time_model, predicts_a_prefill_groups_pipeline) {
  auto m = simple_model(); // 1 us a token, chunks of 128
  m.set_pipeline(4);
  // Four chunks through four stages: a quarter of their sum, and the slowest (any: all equal)
  // through the three later stages.
  EXPECT_EQ(m.prefill_ns(512, 0), (512'000u + 3 * 128'000u) / 4);
  EXPECT_EQ(m.prefill_ns(64, 0), 64'000u) << "a lone chunk passes every stage in turn";
  // A cached prefix of 16 pages of 8,192 bytes: the three other stages read their quarters
  // behind the head's send of all of it to decode, at 0.5 GB/s.
  EXPECT_EQ(m.prefill_ns(512, 256), (256'000u + 3 * 128'000u) / 4 + 16 * 8192 * 7 / 4 * 2);
  m.set_pipeline(1);
  EXPECT_EQ(m.prefill_ns(512, 0), 512'000u);
}

TEST(time_model, learns_each_links_bandwidth_from_pulls_and_queues_behind_a_backlog) {
  auto m = simple_model();
  EXPECT_EQ(m.pull_ns(3, 2, 0, 0), 3 * remote_block_ns) << "the profile's NIC, not learned yet";
  EXPECT_EQ(m.pull_ns(3, 2, 0, 8192), 4 * remote_block_ns) << "one block's bytes ahead of it";
  m.learn_transfer(2, 0, 8192, 4 * remote_block_ns); // a quarter of the NIC: 1/8 of the way
  EXPECT_NEAR(m.bandwidth(2, 0), 0.5e9 + (0.125e9 - 0.5e9) / 8, 1e3);
  EXPECT_EQ(m.bandwidth(0, 2), 0.5e9) << "each direction on its own";
  EXPECT_EQ(m.bandwidth(2, 1), 0.5e9);
  m.learn_transfer(70, 0, 8192, 1000); // no such node
  m.learn_transfer(1, 0, 0, 1000);     // nothing moved
  m.learn_transfer(1, 0, 8192, 0);     // no time
  EXPECT_EQ(m.bandwidth(1, 0), 0.5e9);
  m.learn_transfer(1, 0, 1, 1'000'000'000); // 1 byte/s: bounded to 1 MB/s
  EXPECT_NEAR(m.bandwidth(1, 0), 0.5e9 + (1e6 - 0.5e9) / 8, 1e3);
}

TEST(least_loaded, takes_the_shortest_queue_and_reuses_its_own_blocks) {
  cluster_state s;
  hold(s.index, 1, 2);
  s.prefill[0].queue_ns = 500;
  s.prefill[1].queue_ns = 100;
  scheduling_policy p{policy_kind::least_loaded};
  auto d = p.place(s.view(), four_blocks());
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(d.prefill, 1u);
  EXPECT_EQ(d.reuse_blocks, 2u);
  EXPECT_FALSE(d.pull);
  EXPECT_EQ(d.predicted_ttft_ns, 100 + 2 * local_block_ns + 32'000 + 4 * remote_block_ns);
}

TEST(random, is_seeded_and_picks_only_instances_with_room) {
  cluster_state s;
  s.prefill.push_back({2, true, 0, 0, 0});
  s.prefill[1].alive = false;
  std::vector<uint32_t> a, b;
  scheduling_policy p1{policy_kind::random, 7}, p2{policy_kind::random, 7};
  for (int i = 0; i < 20; ++i) {
    a.push_back(p1.place(s.view(), four_blocks()).prefill);
    b.push_back(p2.place(s.view(), four_blocks()).prefill);
  }
  EXPECT_EQ(a, b);
  for (auto x : a)
    EXPECT_NE(x, 1u) << "instance 1 is dead";
  EXPECT_NE(std::count(a.begin(), a.end(), 0u), 0);
  EXPECT_NE(std::count(a.begin(), a.end(), 2u), 0);
}

TEST(round_robin, cycles_over_the_instances_with_room) {
  cluster_state s;
  s.prefill.push_back({2, true, 0, 0, 0});
  auto v = s.view();
  v.prefill_queue_max = 4;
  s.prefill[1].queued_jobs = 4; // full
  scheduling_policy p{policy_kind::round_robin};
  std::vector<uint32_t> got;
  for (int i = 0; i < 4; ++i)
    got.push_back(p.place(v, four_blocks()).prefill);
  EXPECT_EQ(got, (std::vector<uint32_t>{0, 2, 0, 2}));
}

TEST(local_cache_aware, weighs_a_cached_prefix_against_a_queue) {
  cluster_state s;
  hold(s.index, 0, 3); // instance 0's node holds 3 of the 4 blocks
  s.prefill[0].queue_ns = 100'000;
  scheduling_policy p{policy_kind::local_cache_aware};
  // Instance 0: 100,000 queued + 3 local loads + 16 tokens + hand-off = 206,112 ns;
  // instance 1: 64 tokens + hand-off = 129,536 ns.
  auto d = p.place(s.view(), four_blocks());
  EXPECT_EQ(d.prefill, 1u);
  EXPECT_EQ(d.predicted_ttft_ns, 64'000 + 4 * remote_block_ns);
  s.prefill[0].queue_ns = 10'000; // now 116,112 ns
  d = p.place(s.view(), four_blocks());
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_EQ(d.reuse_blocks, 3u);
  EXPECT_EQ(d.predicted_ttft_ns, 10'000 + 3 * local_block_ns + 16'000 + 4 * remote_block_ns);
}

TEST(global_cache_aware, pulls_past_the_threshold_and_reuses_its_own_below_it) {
  cluster_state s;
  hold(s.index, 2, 4); // node 2 (no prefill instance) holds the whole prompt
  hold(s.index, 0, 1); // instance 0's node holds its first block
  auto v = s.view();
  v.kvcache_balancing_threshold = 1.5;
  scheduling_policy p{policy_kind::global_cache_aware};
  // Instance 0: 4 / 1 > 1.5, so it pulls 3 blocks: 1 local + 3 remote loads, 1 token, hand-off.
  // Instance 1: it holds none, so it pulls all 4, which takes longer.
  auto d = p.place(v, four_blocks());
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_TRUE(d.pull);
  EXPECT_EQ(d.reuse_blocks, 4u);
  EXPECT_EQ(d.local_blocks, 1u);
  EXPECT_EQ(d.predicted_ttft_ns,
            local_block_ns + 3 * remote_block_ns + 1'000 + 4 * remote_block_ns);
  // With a threshold of 5, instance 0 keeps to its own block: 48 tokens computed.
  v.kvcache_balancing_threshold = 5;
  d = p.place(v, four_blocks());
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_FALSE(d.pull);
  EXPECT_EQ(d.reuse_blocks, 1u);
  EXPECT_EQ(d.predicted_ttft_ns, local_block_ns + 48'000 + 4 * remote_block_ns);
}

TEST(global_cache_aware, a_busy_or_slow_holder_makes_a_pull_cost_more) {
  cluster_state s;
  hold(s.index, 2, 4); // node 2 (no prefill instance) holds the whole prompt
  hold(s.index, 0, 1);
  auto v = s.view();
  scheduling_policy p{policy_kind::global_cache_aware};
  // Others are still reading 3 blocks from node 2: instance 0's pull of 3 waits behind them.
  const std::vector<uint64_t> backlog{0, 0, 3 * 8192};
  v.pull_backlog_bytes = backlog;
  auto d = p.place(v, four_blocks());
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_EQ(d.pull_from, 2u);
  EXPECT_EQ(d.predicted_ttft_ns,
            local_block_ns + 6 * remote_block_ns + 1'000 + 4 * remote_block_ns);
  // Pulls from node 2 to node 0 took ten times the NIC's time, again and again: the link is
  // learned slow, and instance 1 (node 1, link not learned) pulling all 4 is faster.
  v.pull_backlog_bytes = {};
  for (int i = 0; i < 100; ++i)
    s.model.learn_transfer(2, 0, 3 * 8192, 10 * 3 * remote_block_ns);
  EXPECT_NEAR(s.model.bandwidth(2, 0), 0.05e9, 0.001e9);
  d = p.place(v, four_blocks());
  EXPECT_EQ(d.prefill, 1u);
  EXPECT_TRUE(d.pull);
  EXPECT_EQ(d.predicted_ttft_ns, 4 * remote_block_ns + 1'000 + 4 * remote_block_ns);
}

TEST(local_cache_aware, a_prefix_on_the_nodes_drive_is_reused_after_its_read_back) {
  cluster_state s;
  s.model = testing::simple_time_model(0.25e9); // a block's 8,192 bytes in 32,768 ns
  prefix_index ssd;
  hold(s.index, 0, 1); // instance 0's node: block 1 in DRAM, blocks 2 and 3 on its drive
  ssd.add(four_keys[1], 0);
  ssd.add(four_keys[2], 0);
  auto v = s.view();
  v.ssd_index = &ssd;
  scheduling_policy p{policy_kind::local_cache_aware};
  // Instance 0: 2 drive reads + 3 local loads + 16 tokens + hand-off = 155,648 ns; instance 1:
  // 64 tokens + hand-off = 129,536 ns. A read back costs more than computing, here.
  auto d = p.place(v, four_blocks());
  EXPECT_EQ(d.prefill, 1u);
  EXPECT_EQ(d.predicted_ttft_ns, 64'000 + 4 * remote_block_ns);
  // A drive 4x faster: 2 x 8,192 + 3 x 8,192 + 16,000 + hand-off = 122,496 ns, instance 0.
  s.model = testing::simple_time_model(1e9);
  d = p.place(v, four_blocks());
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_EQ(d.reuse_blocks, 3u);
  EXPECT_EQ(d.predicted_ttft_ns, 2 * 8192 + 3 * local_block_ns + 16'000 + 4 * remote_block_ns);
  // Without the SSD index the conductor sees block 1 only.
  v.ssd_index = nullptr;
  d = p.place(v, four_blocks());
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_EQ(d.reuse_blocks, 1u);
}

TEST(global_cache_aware, a_pull_from_a_holders_drive_is_charged_its_read) {
  cluster_state s;
  s.model = testing::simple_time_model(1e9);
  prefix_index ssd;
  for (const auto& key : four_keys)
    ssd.add(key, 2); // node 2 (no prefill instance) holds the whole prompt, on its drive
  hold(s.index, 0, 1);
  auto v = s.view();
  v.ssd_index = &ssd;
  scheduling_policy p{policy_kind::global_cache_aware};
  // Instance 0 pulls blocks 2 to 4: node 2 reads them back (3 x 8,192 ns) and sends them.
  auto d = p.place(v, four_blocks());
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_TRUE(d.pull);
  EXPECT_EQ(d.pull_from, 2u);
  EXPECT_EQ(d.reuse_blocks, 4u);
  EXPECT_EQ(d.predicted_ttft_ns,
            local_block_ns + 3 * 8192 + 3 * remote_block_ns + 1'000 + 4 * remote_block_ns);
}

TEST(block_cost, adds_the_blocks_to_compute_and_those_queued) {
  cluster_state s;
  hold(s.index, 0, 2);
  s.prefill[0].queued_tokens = 48; // 3 blocks queued: cost 2 + 3
  s.prefill[1].queued_tokens = 0;  // cost 4 + 0
  scheduling_policy p{policy_kind::block_cost};
  EXPECT_EQ(p.place(s.view(), four_blocks()).prefill, 1u);
  s.prefill[0].queued_tokens = 16; // cost 2 + 1
  auto d = p.place(s.view(), four_blocks());
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_EQ(d.reuse_blocks, 2u);
}

TEST(decode_choice, takes_the_lowest_predicted_tbt_within_kv_memory) {
  cluster_state s;
  s.loads[0] = {{1000, 1'000'000'000}, {1000, 1'000'000'000}}; // 2 requests: TBT 3 ms with ours
  s.loads[1] = {{1000, 1'000'000'000}};                        // 1: TBT 2 ms
  scheduling_policy p{policy_kind::least_loaded};
  auto d = p.place(s.view(), four_blocks());
  EXPECT_EQ(d.decode, 1u);
  EXPECT_EQ(d.predicted_tbt_ns, 2'000'000u);
  s.decode[1].capacity_tokens = 1000 + 64 + 8 - 1; // one token short for this request
  d = p.place(s.view(), four_blocks());
  EXPECT_EQ(d.decode, 0u);
  EXPECT_EQ(d.predicted_tbt_ns, 3'000'000u);
  s.decode[0].alive = false;
  d = p.place(s.view(), four_blocks());
  EXPECT_FALSE(d.placed);
  EXPECT_NE(d.reason.find("KV memory"), std::string::npos) << d.reason;
}

TEST(decode_choice, within_the_tbt_slack_takes_the_nic_that_other_hand_offs_crowd_least) {
  cluster_state s;
  s.loads[0] = {{1000, 1'000'000'000}}; // both: TBT 2 ms with ours
  s.loads[1] = {{1000, 1'000'000'000}};
  scheduling_policy p{policy_kind::least_loaded};
  auto d = p.place(s.view(), four_blocks());
  ASSERT_TRUE(d.placed);
  EXPECT_EQ(d.decode, 0u) << "no hand-off known: the lowest index";
  // Sent after its prefill: its 4 pages at 0.5 GB/s end with its first token.
  ASSERT_EQ(d.handoff_burst_ns, 4 * remote_block_ns);
  const auto arrival = static_cast<int64_t>(d.predicted_ttft_ns);
  const auto burst = static_cast<int64_t>(d.handoff_burst_ns);
  // Another hand-off into instance 0 over the second half of this one's, into 1 over a quarter.
  const std::vector<handoff_burst> into_0{{arrival - burst / 2, arrival + 1000}};
  const std::vector<handoff_burst> into_1{{arrival - 2 * burst, arrival - 3 * burst / 4}};
  s.decode[0].inbound = into_0;
  s.decode[1].inbound = into_1;
  d = p.place(s.view(), four_blocks());
  EXPECT_EQ(d.decode, 0u) << "no slack: by TBT alone";
  auto v = s.view();
  v.decode_tbt_slack = 0.1;
  d = p.place(v, four_blocks());
  EXPECT_EQ(d.decode, 1u) << "equal TBT, a quarter crowded against a half";
  auto c = choose_decode(v, four_blocks(),
                         {.ttft_ns = d.predicted_ttft_ns, .handoff_burst_ns = d.handoff_burst_ns});
  ASSERT_TRUE(c);
  EXPECT_EQ(c->crowded_ns, static_cast<uint64_t>(burst / 4));
  // Beyond the slack: instance 1 with two requests (TBT 3 ms) is not taken however free its NIC.
  s.loads[1].push_back({1000, 1'000'000'000});
  v = s.view();
  v.decode_tbt_slack = 0.1;
  EXPECT_EQ(p.place(v, four_blocks()).decode, 0u);
  v.decode_tbt_slack = 0.5;
  EXPECT_EQ(p.place(v, four_blocks()).decode, 1u) << "3 ms is within half of 2 ms";
  // Admission holds the slack within the TBT SLO while the lowest TBT meets it.
  v.admission = admission_mode::current_load;
  v.slo.tbt_ns = 2'500'000;
  d = p.place(v, four_blocks());
  EXPECT_EQ(d.decode, 0u);
  EXPECT_EQ(d.predicted_tbt_ns, 2'000'000u);
}

TEST(decode_choice, a_tracked_burst_leaves_at_its_end_or_with_its_request) {
  inbound_track t;
  t.add(1, {0, 100});
  t.add(2, {50, 300});
  t.add(3, {10, 200});
  t.add(2, {60, 400}); // placed again: replaced
  ASSERT_EQ(t.current(0).size(), 3u);
  EXPECT_EQ(t.current(100).size(), 2u) << "request 1's ended at 100";
  t.remove(3);
  const auto left = t.current(100);
  ASSERT_EQ(left.size(), 1u);
  EXPECT_EQ(left[0].start_ns, 60);
  EXPECT_EQ(left[0].end_ns, 400);
  EXPECT_TRUE(t.current(400).empty());
}

TEST(coupled, a_request_decodes_where_it_prefills_and_ties_go_to_the_lighter_batch) {
  // Two coupled instances, each prefill instance i being decode instance i, on nodes 0 and 1.
  cluster_state s;
  s.decode[0].node = 0;
  s.decode[1].node = 1;
  s.loads[0] = {{1000, 1'000'000'000}, {1000, 1'000'000'000}};
  s.loads[1] = {{1000, 1'000'000'000}};
  auto v = s.view();
  v.coupled = true;
  scheduling_policy ll{policy_kind::least_loaded};
  auto d = ll.place(v, four_blocks());
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(d.prefill, 1u) << "equal queues: the instance holding fewer requests";
  EXPECT_EQ(d.decode, 1u);
  EXPECT_EQ(d.predicted_tbt_ns, 2'000'000u);
  // Memory full is no refusal: the instance queues the request.
  s.decode[1].capacity_tokens = 10;
  v = s.view();
  v.coupled = true;
  d = ll.place(v, four_blocks());
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(d.decode, d.prefill);
  // A cached prefix outweighs the lighter batch under local_cache_aware.
  hold(s.index, 0, 4);
  v = s.view();
  v.coupled = true;
  scheduling_policy lc{policy_kind::local_cache_aware};
  d = lc.place(v, four_blocks());
  EXPECT_EQ(d.prefill, 0u);
  EXPECT_EQ(d.decode, 0u);
  // Not coupled, the same tie goes to the lowest index and decode is chosen apart.
  v.coupled = false;
  s.index = prefix_index{};
  v = s.view();
  d = ll.place(v, four_blocks());
  EXPECT_EQ(d.prefill, 0u);
}

TEST(admission, rejects_what_would_miss_an_slo_with_the_reason_and_a_retry_time) {
  cluster_state s;
  s.prefill[0].queue_ns = s.prefill[1].queue_ns = 40'000'000'000; // 40 s queues
  auto v = s.view();
  v.admission = admission_mode::current_load;
  scheduling_policy p{policy_kind::least_loaded};
  auto d = p.place(v, four_blocks());
  ASSERT_FALSE(d.placed);
  EXPECT_NE(d.reason.find("predicted TTFT 40.000 s exceeds the SLO of 30.000 s"), std::string::npos)
      << d.reason;
  EXPECT_EQ(d.retry_after_ms, 10'001u) << "40 s and 129.5 us, less the 30 s SLO, rounded up";
  v.admission = admission_mode::none;
  EXPECT_TRUE(p.place(v, four_blocks()).placed) << "none admits what has room";
}

TEST(admission, predicted_load_counts_the_decodes_that_end_before_the_request_arrives) {
  cluster_state s;
  s.decode.pop_back();
  s.loads.pop_back();
  // Three requests end 1 ms from now, before this one's TTFT (about 129.5 us... plus queue).
  s.prefill[0].queue_ns = s.prefill[1].queue_ns = 5'000'000;
  s.loads[0] = {{100, 1'000'000}, {100, 1'000'000}, {100, 1'000'000}};
  auto v = s.view();
  v.slo.tbt_ns = 2'000'000; // 2 ms: a batch of 4 (4 ms) misses it, a batch of 1 meets it
  v.admission = admission_mode::current_load;
  scheduling_policy p{policy_kind::least_loaded};
  auto d = p.place(v, four_blocks());
  ASSERT_FALSE(d.placed);
  EXPECT_NE(d.reason.find("predicted TBT 0.004 s"), std::string::npos) << d.reason;
  EXPECT_EQ(d.retry_after_ms, 1u) << "when the first of them ends";
  v.admission = admission_mode::predicted_load;
  d = p.place(v, four_blocks());
  ASSERT_TRUE(d.placed) << d.reason;
  EXPECT_EQ(d.predicted_tbt_ns, 1'000'000u);
}

TEST(placement, without_room_anywhere_says_so) {
  cluster_state s;
  s.prefill[0].alive = false;
  s.prefill[1].queued_jobs = 256;
  for (auto kind :
       {policy_kind::random, policy_kind::round_robin, policy_kind::least_loaded,
        policy_kind::local_cache_aware, policy_kind::global_cache_aware, policy_kind::block_cost}) {
    scheduling_policy p{kind};
    auto d = p.place(s.view(), four_blocks());
    EXPECT_FALSE(d.placed) << to_string(kind);
    EXPECT_NE(d.reason.find("no live prefill instance"), std::string::npos) << d.reason;
  }
}

TEST(placement, names_parse_back) {
  for (auto kind :
       {policy_kind::random, policy_kind::round_robin, policy_kind::least_loaded,
        policy_kind::local_cache_aware, policy_kind::global_cache_aware, policy_kind::block_cost}) {
    policy_kind back{};
    ASSERT_TRUE(parse(to_string(kind), back));
    EXPECT_EQ(back, kind);
  }
  admission_mode m{};
  EXPECT_TRUE(parse("predicted_load", m));
  EXPECT_EQ(m, admission_mode::predicted_load);
  EXPECT_FALSE(parse("v0", m));
}

} // namespace
} // namespace crescent

namespace crescent {
namespace {

TEST(decode_choice, the_conductors_sorted_sums_give_what_a_pass_over_the_requests_gives) {
  // The conductor keeps each decode instance's requests in end order with their cumulative
  // tokens (decode_track), so a placement finds the batch at a time by binary search. On random
  // states, at random times and memory limits, in both admission modes that count the batch,
  // that path and the plain pass over the requests choose alike.
  time_model_source src;
  src.name = "context";
  src.prefill_call_ns = [](uint64_t, uint64_t tokens) { return 1000 * tokens; };
  src.decode_step_ns = [](uint32_t batch, uint64_t context) {
    return 1'000'000ull * batch + context;
  };
  src.h2d_bytes_per_s = 1e9;
  src.nic_bytes_per_s = 0.5e9;
  auto model = time_model::fit(src, gpu::model_config{}, 128);
  ASSERT_TRUE(model);
  std::mt19937_64 rng(11);
  for (int round = 0; round < 2000; ++round) {
    std::vector<decode_track> tracks(4);
    for (auto& t : tracks)
      for (uint64_t id = 0, n = rng() % 40; id < n; ++id)
        t.add(id, {1 + rng() % 5000, static_cast<int64_t>(rng() % 1000) * 1'000'000});
    std::vector<decode_view> plain, summed;
    for (uint32_t i = 0; i < tracks.size(); ++i) {
      const uint64_t capacity = 20'000 + rng() % 100'000;
      plain.push_back({i, rng() % 8 != 0, capacity, tracks[i].loads()});
      summed.push_back(plain.back());
      summed.back().tokens_before = tracks[i].tokens_before();
    }
    schedule_view v;
    v.model = &*model;
    v.block_tokens = 16;
    v.now_ns = static_cast<int64_t>(rng() % 500) * 1'000'000;
    v.admission = round % 2 == 0 ? admission_mode::predicted_load : admission_mode::current_load;
    const request_view r{static_cast<uint32_t>(1 + rng() % 4000), 8, {}};
    prefill_choice p;
    p.ttft_ns = (rng() % 400) * 1'000'000; // ends at the arrival too
    v.decode = plain;
    const auto a = choose_decode(v, r, p);
    v.decode = summed;
    const auto b = choose_decode(v, r, p);
    ASSERT_EQ(a.has_value(), b.has_value()) << round;
    if (a) {
      EXPECT_EQ(a->instance, b->instance) << round;
      EXPECT_EQ(a->tbt_ns, b->tbt_ns) << round;
    }
  }
}

} // namespace
} // namespace crescent
