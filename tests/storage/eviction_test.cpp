#include "storage/eviction.hpp"
#include "support/block_keys.hpp"

#include <gtest/gtest.h>

namespace crescent::storage {
namespace {

// The victims' numbers: tests name block n by the key {0, n}.
std::vector<uint64_t> order_of(eviction_index& idx) {
  std::vector<uint64_t> out;
  for (const auto& key : idx.victims(UINT64_MAX, 100, nullptr))
    out.push_back(key.lo);
  return out;
}

TEST(eviction, lru_evicts_the_least_recently_used_first) {
  eviction_index idx{eviction_policy::lru};
  for (uint64_t k = 1; k <= 4; ++k)
    idx.insert(block_key{0, k}, 100, 0);
  idx.touch(1_key);
  idx.touch(3_key);
  EXPECT_EQ(order_of(idx), (std::vector<uint64_t>{2, 4, 1, 3}));
}

TEST(eviction, lfu_evicts_the_least_frequently_used_first) {
  eviction_index idx{eviction_policy::lfu};
  for (uint64_t k = 1; k <= 3; ++k)
    idx.insert(block_key{0, k}, 100, 0);
  idx.touch(1_key);
  idx.touch(1_key);
  idx.touch(2_key);
  EXPECT_EQ(order_of(idx), (std::vector<uint64_t>{3, 2, 1}));
}

TEST(eviction, length_aware_evicts_the_deepest_blocks_first) {
  eviction_index idx{eviction_policy::length_aware};
  idx.insert(10_key, 100, 0);
  idx.insert(11_key, 100, 5);
  idx.insert(12_key, 100, 2);
  idx.insert(13_key, 100, 5);
  idx.touch(11_key);
  EXPECT_EQ(order_of(idx), (std::vector<uint64_t>{13, 11, 12, 10}));
}

// The block owner calls touch for each use the store master reports (gets, puts of blocks that
// exist); a key it no longer holds may come, and a repeated insert is a use as well.
TEST(eviction, touches_reorder_lru_and_lfu_and_unknown_keys_change_nothing) {
  eviction_index lru{eviction_policy::lru};
  for (uint64_t k = 1; k <= 3; ++k)
    lru.insert(block_key{0, k}, 100, 0);
  lru.touch(1_key);
  lru.touch(99_key);
  EXPECT_EQ(order_of(lru), (std::vector<uint64_t>{2, 3, 1}));
  EXPECT_FALSE(lru.contains(99_key));
  lru.insert(2_key, 100, 0);
  EXPECT_EQ(order_of(lru), (std::vector<uint64_t>{3, 1, 2}));
  EXPECT_EQ(lru.size(), 3u);

  eviction_index lfu{eviction_policy::lfu};
  for (uint64_t k = 1; k <= 3; ++k)
    lfu.insert(block_key{0, k}, 100, 0);
  lfu.touch(3_key);
  lfu.touch(3_key);
  lfu.touch(1_key);
  lfu.touch(99_key);
  EXPECT_EQ(order_of(lfu), (std::vector<uint64_t>{2, 1, 3})) << "uses 1, 2, 3";
  lfu.touch(2_key);
  lfu.insert(2_key, 100, 0);
  EXPECT_EQ(order_of(lfu), (std::vector<uint64_t>{1, 3, 2})) << "3 and 2 tie: 3 used longer ago";
  lfu.erase(1_key);
  lfu.touch(1_key);
  EXPECT_EQ(order_of(lfu), (std::vector<uint64_t>{3, 2})) << "a touch after erase adds nothing";
}

TEST(eviction, victims_stop_at_the_byte_target_and_skip_what_must_stay) {
  eviction_index idx{eviction_policy::lru};
  for (uint64_t k = 1; k <= 5; ++k)
    idx.insert(block_key{0, k}, 100, 0);
  auto v = idx.victims(250, 100, [](const block_key& k) { return k == 2_key; });
  EXPECT_EQ(v, numbered_keys({1, 3, 4}));
  EXPECT_EQ(idx.victims(1000, 2, nullptr).size(), 2u);
  idx.erase(1_key);
  EXPECT_FALSE(idx.contains(1_key));
  EXPECT_EQ(idx.size(), 4u);
}

TEST(eviction, policies_parse_by_name) {
  eviction_policy p;
  EXPECT_TRUE(parse("lfu", p));
  EXPECT_EQ(p, eviction_policy::lfu);
  EXPECT_FALSE(parse("fifo", p));
  EXPECT_STREQ(to_string(eviction_policy::length_aware), "length_aware");
}

} // namespace
} // namespace crescent::storage
