// The prefix index's hash map (actors/conductor/flat_key_map.hpp), against std::map on the same
// operations: colliding keys, erasure from the middle of a probe run and across the table's
// wrap, growth, and a rebuild without emptied values.
#include "actors/conductor/flat_key_map.hpp"
#include "support/block_keys.hpp"

#include <gtest/gtest.h>

#include <map>
#include <random>

namespace crescent {
namespace {

struct zero {
  bool operator()(uint64_t v) const { return v == 0; }
};
using map = flat_key_map<uint64_t, zero>;

// Everything `m` holds equals `want`, both ways.
void expect_same(map& m, const std::map<block_key, uint64_t>& want) {
  EXPECT_EQ(m.size(), want.size());
  for (const auto& [k, v] : want) {
    const auto* got = m.find(k);
    ASSERT_NE(got, nullptr) << to_string(k);
    EXPECT_EQ(*got, v) << to_string(k);
  }
  size_t seen = 0;
  m.for_each([&](const block_key& k, uint64_t& v) {
    ++seen;
    auto i = want.find(k);
    ASSERT_NE(i, want.end()) << to_string(k);
    EXPECT_EQ(v, i->second);
  });
  EXPECT_EQ(seen, want.size());
}

TEST(flat_key_map, finds_what_it_holds_and_nothing_else) {
  map m;
  EXPECT_EQ(m.find(7_key), nullptr);
  EXPECT_FALSE(m.erase(7_key));
  m.insert(7_key) = 70;
  m.insert(0_key) = 1; // key 0 is a key like any other
  EXPECT_EQ(*m.find(7_key), 70u);
  EXPECT_EQ(*m.find(0_key), 1u);
  EXPECT_EQ(m.find(8_key), nullptr);
  m.insert(7_key) |= 1; // the same entry
  EXPECT_EQ(*m.find(7_key), 71u);
  EXPECT_EQ(m.size(), 2u);
}

TEST(flat_key_map, erasing_inside_probe_runs_keeps_every_other_key_reachable) {
  // Keys that share a home slot (multiples of the table size's inverse hash step are hard to
  // pick: instead many keys in a small table, where runs are long and wrap around), erased in
  // random order and re-added, checked against std::map after every step.
  std::mt19937_64 rng(5);
  map m;
  std::map<block_key, uint64_t> want;
  for (int round = 0; round < 20'000; ++round) {
    // 64 keys, differing in both words: the table stays at 128 slots or fewer.
    const block_key key{rng() % 4, rng() % 16};
    if (rng() % 3 == 0) {
      EXPECT_EQ(m.erase(key), want.erase(key) == 1);
    } else {
      const uint64_t v = rng() | 1;
      m.insert(key) = v;
      want[key] = v;
    }
    if (round % 997 == 0)
      expect_same(m, want);
  }
  expect_same(m, want);
  EXPECT_LE(m.capacity_slots(), 128u);
}

TEST(flat_key_map, grows_past_a_million_keys_at_most_five_eighths_full) {
  map m;
  for (uint64_t k = 1; k <= 1'200'000; ++k)
    m.insert(block_key{k >> 10, k * 0x10001}) = k;
  EXPECT_EQ(m.size(), 1'200'000u);
  EXPECT_LE(m.size() * 8, m.capacity_slots() * 5);
  for (uint64_t k = 1; k <= 1'200'000; k += 7919)
    EXPECT_EQ(*m.find(block_key{k >> 10, k * 0x10001}), k);
  EXPECT_EQ(m.find(block_key{1'200'001 >> 10, uint64_t{0x10001} * 1'200'001}), nullptr);
}

TEST(flat_key_map, drops_the_values_emptied_in_place) {
  map m;
  std::map<block_key, uint64_t> want;
  for (uint64_t k = 0; k < 1000; ++k) {
    m.insert(block_key{0, k}) = k % 3 == 0 ? 1 : 3;
    if (k % 3 != 0)
      want[block_key{0, k}] = 2;
  }
  m.for_each([](const block_key&, uint64_t& v) { v &= ~uint64_t{1}; }); // node 0 leaves
  m.drop_empty();
  expect_same(m, want);
}

} // namespace
} // namespace crescent
