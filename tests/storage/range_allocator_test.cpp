#include "storage/range_allocator.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace crescent::storage {
namespace {

TEST(range_allocator, allocates_rounded_ranges_and_merges_on_free) {
  range_allocator a{1 << 20, 4096, 64};
  auto x = a.allocate(1);
  auto y = a.allocate(4097);
  ASSERT_TRUE(x && y);
  EXPECT_EQ(x->size, 4096u);
  EXPECT_EQ(y->size, 8192u);
  EXPECT_NE(x->offset, y->offset);
  EXPECT_EQ(a.used_bytes(), 12288u);
  EXPECT_TRUE(a.consistent());
  a.free(*x);
  a.free(*y);
  EXPECT_EQ(a.free_bytes(), 1u << 20);
  EXPECT_TRUE(a.consistent());
  auto all = a.allocate(1 << 20);
  ASSERT_TRUE(all) << "freed neighbours merge back into one range";
  EXPECT_FALSE(a.allocate(1)) << "full";
  EXPECT_FALSE(a.allocate(0));
}

TEST(range_allocator, random_workload_keeps_every_invariant) {
  range_allocator a{64ull << 20, 4096, 4096};
  std::mt19937_64 rng{5};
  std::vector<range> live;
  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const uint64_t size = 1 + rng() % (2u << 20);
      if (auto r = a.allocate(size)) {
        EXPECT_GE(r->size, size);
        EXPECT_EQ(r->offset % 4096, 0u);
        live.push_back(*r);
      }
    } else {
      const size_t i = rng() % live.size();
      a.free(live[i]);
      live.erase(live.begin() + static_cast<long>(i));
    }
    if (step % 1000 == 0) {
      ASSERT_TRUE(a.consistent()) << "step " << step;
    }
  }
  // No two live ranges overlap.
  std::sort(live.begin(), live.end(), [](auto& p, auto& q) { return p.offset < q.offset; });
  for (size_t i = 1; i < live.size(); ++i)
    ASSERT_LE(live[i - 1].offset + live[i - 1].size, live[i].offset);
  for (auto& r : live)
    a.free(r);
  EXPECT_EQ(a.used_bytes(), 0u);
  EXPECT_TRUE(a.consistent());
}

TEST(range_allocator, a_full_node_pool_refuses_instead_of_allocating) {
  range_allocator a{1 << 20, 4096, 3};
  auto x = a.allocate(4096);
  auto y = a.allocate(4096);
  ASSERT_TRUE(x && y);
  EXPECT_FALSE(a.allocate(4096)) << "no node left for another split";
  EXPECT_TRUE(a.consistent());
}

TEST(range_allocator, restore_rebuilds_a_persisted_layout) {
  range_allocator a{1 << 20, 4096, 64};
  std::vector<std::pair<uint64_t, uint64_t>> used{{0, 4096}, {8192, 10000}, {65536, 4096}};
  auto ranges = a.restore(used);
  ASSERT_TRUE(ranges);
  ASSERT_EQ(ranges->size(), 3u);
  EXPECT_EQ((*ranges)[1].offset, 8192u);
  EXPECT_EQ((*ranges)[1].size, 12288u);
  EXPECT_EQ(a.used_bytes(), 4096u + 12288u + 4096u);
  EXPECT_TRUE(a.consistent());
  auto gap = a.allocate(4096);
  ASSERT_TRUE(gap);
  for (auto& r : *ranges)
    EXPECT_TRUE(gap->offset + gap->size <= r.offset || r.offset + r.size <= gap->offset);
  a.free((*ranges)[1]);
  EXPECT_TRUE(a.consistent());
  range_allocator b{1 << 20, 4096, 64};
  EXPECT_FALSE(b.restore({{0, 8192}, {4096, 4096}})) << "overlap";
  EXPECT_FALSE(b.restore({{100, 4096}})) << "unaligned";
  EXPECT_FALSE(b.restore({{1 << 20, 4096}})) << "beyond the capacity";
}

} // namespace
} // namespace crescent::storage
