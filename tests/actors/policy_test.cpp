#include "actors/conductor/policy.hpp"

#include <gtest/gtest.h>

namespace crescent {
namespace {

TEST(prefix_index, counts_leading_blocks_per_node) {
  prefix_index idx;
  idx.add(1, 0);
  idx.add(2, 0);
  idx.add(1, 3);
  std::vector<uint64_t> keys{1, 2, 3};
  EXPECT_EQ(idx.cached_prefix(keys, 0), 2u);
  EXPECT_EQ(idx.cached_prefix(keys, 3), 1u);
  EXPECT_EQ(idx.cached_prefix(keys, 1), 0u);
  idx.remove_node(0);
  EXPECT_EQ(idx.cached_prefix(keys, 0), 0u);
  EXPECT_EQ(idx.size(), 1u);
}

TEST(place_v0, longest_prefix_wins_then_shortest_queue) {
  prefix_index idx;
  idx.add(1, 1);
  std::vector<uint64_t> keys{1, 2};
  std::vector<instance_view> prefill{{0, 0, true}, {1, 5, true}, {2, 0, true}};
  std::vector<instance_view> decode{{3, 4, true}, {4, 1, true}};
  auto p = place_v0(idx, keys, prefill, decode, 10);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.prefill, 1u) << "node 1 holds the prefix";
  EXPECT_EQ(p.cached_blocks, 1u);
  EXPECT_EQ(p.decode, 1u) << "least loaded decode";
  std::vector<uint64_t> cold{9};
  prefill[0].load = 3;
  p = place_v0(idx, cold, prefill, decode, 10);
  EXPECT_EQ(p.prefill, 2u) << "no prefix anywhere: shortest queue";
}

TEST(place_v0, dead_and_full_instances_are_skipped) {
  prefix_index idx;
  idx.add(1, 0);
  std::vector<uint64_t> keys{1};
  std::vector<instance_view> prefill{{0, 0, false}, {1, 10, true}, {2, 9, true}};
  std::vector<instance_view> decode{{3, 0, false}, {4, 7, true}};
  auto p = place_v0(idx, keys, prefill, decode, 10);
  ASSERT_TRUE(p.placed);
  EXPECT_EQ(p.prefill, 2u);
  EXPECT_EQ(p.decode, 1u);
  prefill[2].load = 10;
  p = place_v0(idx, keys, prefill, decode, 10);
  EXPECT_FALSE(p.placed);
  EXPECT_FALSE(p.reason.empty());
  prefill[2].load = 0;
  decode[1].alive = false;
  p = place_v0(idx, keys, prefill, decode, 10);
  EXPECT_FALSE(p.placed);
  EXPECT_NE(p.reason.find("decode"), std::string::npos);
}

} // namespace
} // namespace crescent
