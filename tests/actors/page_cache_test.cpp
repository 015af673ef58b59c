// The coupled instance's pages and prefix cache (actors/coupled_worker/page_cache.hpp).
#include "actors/coupled_worker/page_cache.hpp"
#include "support/block_keys.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace crescent {
namespace {

TEST(page_cache, without_caching_pages_come_back_free) {
  page_cache c{4, false};
  const std::vector<block_key> keys = numbered_keys({1, 2, 3});
  auto a = c.acquire(keys, 3, 3);
  ASSERT_TRUE(a);
  EXPECT_EQ(a->shared, 0u);
  EXPECT_FALSE(c.publish(a->pages[0], 1_key));
  EXPECT_FALSE(c.acquire(keys, 3, 2)) << "one page left";
  c.release(a->pages);
  EXPECT_EQ(c.available(), 4u);
  EXPECT_EQ(c.match(keys), 0u);
}

TEST(page_cache, published_pages_are_shared_by_the_next_sequence) {
  page_cache c{8, true};
  const std::vector<block_key> keys = numbered_keys({1, 2, 3});
  auto a = c.acquire(keys, 2, 4);
  ASSERT_TRUE(a);
  EXPECT_TRUE(c.publish(a->pages[0], 1_key));
  EXPECT_TRUE(c.publish(a->pages[1], 2_key));
  EXPECT_FALSE(c.publish(a->pages[2], 2_key)) << "another page holds key 2";
  // While a uses them, b shares both; only its own pages are new.
  auto b = c.acquire(keys, 2, 3);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->shared, 2u);
  EXPECT_EQ(b->pages[0], a->pages[0]);
  EXPECT_EQ(b->pages[1], a->pages[1]);
  EXPECT_EQ(c.available(), 8u - 4 - 1);
  // shared_max bounds the sharing (the prompt's last token must be computed).
  auto d = c.acquire(keys, 1, 2);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->shared, 1u);
  c.release(a->pages);
  c.release(b->pages);
  c.release(d->pages);
  EXPECT_EQ(c.available(), 8u);
  EXPECT_EQ(c.cached(), 2u);
  EXPECT_EQ(c.match(keys), 2u);
}

TEST(page_cache, idle_cached_pages_are_evicted_least_recently_used_first) {
  page_cache c{4, true};
  const std::vector<block_key> a_keys = numbered_keys({10, 11});
  const std::vector<block_key> b_keys = numbered_keys({20, 21});
  auto a = c.acquire(a_keys, 2, 2);
  auto b = c.acquire(b_keys, 2, 2);
  ASSERT_TRUE(a && b);
  for (int k = 0; k < 2; ++k) {
    c.publish(a->pages[k], a_keys[k]);
    c.publish(b->pages[k], b_keys[k]);
  }
  c.release(a->pages);
  c.release(b->pages); // a then b: a's blocks are the older
  // a's first block is used again, so b's are now the least recently used... after a's second.
  auto again = c.acquire({a_keys.data(), 1}, 1, 1);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->shared, 1u);
  c.release(again->pages);
  // Two fresh pages: the two oldest idle ones go, a's second block then b's first.
  auto fresh = c.acquire(std::vector<block_key>{}, 0, 2);
  ASSERT_TRUE(fresh);
  EXPECT_EQ(c.take_evicted(), numbered_keys({11, 20}));
  EXPECT_EQ(c.evictions(), 2u);
  EXPECT_EQ(c.match(a_keys), 1u);
  EXPECT_EQ(c.match(b_keys), 0u);
  EXPECT_TRUE(c.take_evicted().empty());
}

TEST(page_cache, a_shared_page_in_use_is_never_evicted_and_a_failed_acquire_changes_nothing) {
  page_cache c{3, true};
  const std::vector<block_key> keys = numbered_keys({1, 2});
  auto a = c.acquire(keys, 2, 2);
  ASSERT_TRUE(a);
  c.publish(a->pages[0], 1_key);
  c.publish(a->pages[1], 2_key);
  c.release(a->pages); // both idle and cached: 3 available
  // A sequence sharing both blocks needs 4 pages: 2 shared + 2 new, with only 1 free beside them.
  EXPECT_FALSE(c.acquire(keys, 2, 4));
  EXPECT_EQ(c.cached(), 2u);
  EXPECT_EQ(c.available(), 3u);
  EXPECT_EQ(c.evictions(), 0u);
  // Sharing both and one new fits without evicting what it shares.
  auto b = c.acquire(keys, 2, 3);
  ASSERT_TRUE(b);
  EXPECT_EQ(b->shared, 2u);
  EXPECT_EQ(c.evictions(), 0u);
  EXPECT_EQ(c.available(), 0u);
}

} // namespace
} // namespace crescent
