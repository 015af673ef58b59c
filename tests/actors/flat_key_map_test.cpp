// The prefix index's hash map (actors/conductor/flat_key_map.hpp), against std::map on the same
// operations: colliding keys, erasure from the middle of a probe run and across the table's
// wrap, growth, and a rebuild without emptied values.
#include "actors/conductor/flat_key_map.hpp"

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
void expect_same(map& m, const std::map<uint64_t, uint64_t>& want) {
  EXPECT_EQ(m.size(), want.size());
  for (const auto& [k, v] : want) {
    const auto* got = m.find(k);
    ASSERT_NE(got, nullptr) << k;
    EXPECT_EQ(*got, v) << k;
  }
  size_t seen = 0;
  m.for_each([&](uint64_t k, uint64_t& v) {
    ++seen;
    auto i = want.find(k);
    ASSERT_NE(i, want.end()) << k;
    EXPECT_EQ(v, i->second);
  });
  EXPECT_EQ(seen, want.size());
}

TEST(flat_key_map, finds_what_it_holds_and_nothing_else) {
  map m;
  EXPECT_EQ(m.find(7), nullptr);
  EXPECT_FALSE(m.erase(7));
  m.insert(7) = 70;
  m.insert(0) = 1; // key 0 is a key like any other
  EXPECT_EQ(*m.find(7), 70u);
  EXPECT_EQ(*m.find(0), 1u);
  EXPECT_EQ(m.find(8), nullptr);
  m.insert(7) |= 1; // the same entry
  EXPECT_EQ(*m.find(7), 71u);
  EXPECT_EQ(m.size(), 2u);
}

TEST(flat_key_map, erasing_inside_probe_runs_keeps_every_other_key_reachable) {
  // Keys that share a home slot (multiples of the table size's inverse hash step are hard to
  // pick: instead many keys in a small table, where runs are long and wrap around), erased in
  // random order and re-added, checked against std::map after every step.
  std::mt19937_64 rng(5);
  map m;
  std::map<uint64_t, uint64_t> want;
  for (int round = 0; round < 20'000; ++round) {
    const uint64_t key = rng() % 64; // 64 keys: the table stays at 128 slots or fewer
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
    m.insert(k * 0x10001) = k;
  EXPECT_EQ(m.size(), 1'200'000u);
  EXPECT_LE(m.size() * 8, m.capacity_slots() * 5);
  for (uint64_t k = 1; k <= 1'200'000; k += 7919)
    EXPECT_EQ(*m.find(k * 0x10001), k);
  EXPECT_EQ(m.find(uint64_t{0x10001} * 1'200'001), nullptr);
}

TEST(flat_key_map, drops_the_values_emptied_in_place) {
  map m;
  std::map<uint64_t, uint64_t> want;
  for (uint64_t k = 0; k < 1000; ++k) {
    m.insert(k) = k % 3 == 0 ? 1 : 3;
    if (k % 3 != 0)
      want[k] = 2;
  }
  m.for_each([](uint64_t, uint64_t& v) { v &= ~uint64_t{1}; }); // node 0 leaves
  m.drop_empty();
  expect_same(m, want);
}

} // namespace
} // namespace crescent
