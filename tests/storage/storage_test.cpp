#include "messages/errors.hpp"
#include "storage/block_key.hpp"
#include "storage/dram_pool.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <set>

namespace crescent::storage {
namespace {

TEST(block_key, keys_chain_over_the_prefix) {
  std::vector<uint32_t> a(64), b(64);
  std::iota(a.begin(), a.end(), 0u);
  b = a;
  b[40] = 999; // block 2 of 16-token blocks differs
  auto ka = chain_block_keys(a, 16, 7);
  auto kb = chain_block_keys(b, 16, 7);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_EQ(ka[1], kb[1]);
  EXPECT_NE(ka[2], kb[2]);
  EXPECT_NE(ka[3], kb[3]); // block 3 is equal, but its prefix is not
  EXPECT_NE(chain_block_keys(a, 16, 8)[0], ka[0]) << "the root separates models";
  // A partial last block has its own key, distinct from the full block a longer prompt has
  // there, and from a partial block of another length.
  auto partial = chain_block_keys(std::span{a}.first(47), 16, 7);
  ASSERT_EQ(partial.size(), 3u);
  EXPECT_EQ(partial[1], ka[1]);
  EXPECT_NE(partial[2], ka[2]);
  EXPECT_NE(chain_block_keys(std::span{a}.first(46), 16, 7)[2], partial[2]);
  EXPECT_TRUE(chain_block_keys(std::span{a}.first(0), 16, 7).empty());
}

TEST(dram_pool, allocate_free_and_reuse) {
  auto engine = *transport::transfer_engine::create_local(1);
  auto pool = dram_pool::create(engine, 2, 4096, 4);
  ASSERT_TRUE(pool);
  auto slots = (*pool)->allocate(6);
  ASSERT_EQ(slots.size(), 4u) << "no more than capacity";
  std::set<uint64_t> offsets;
  for (auto& s : slots) {
    EXPECT_EQ(s.length, 4096u);
    EXPECT_EQ(s.node, 2u);
    offsets.insert(s.offset);
  }
  EXPECT_EQ(offsets.size(), 4u);
  EXPECT_EQ((*pool)->used_slots(), 4u);
  ASSERT_FALSE((*pool)->free(slots[1]));
  EXPECT_TRUE(is((*pool)->free(slots[1]), errc::invalid_argument)) << "double free";
  auto odd = slots[0];
  odd.offset += 1;
  EXPECT_TRUE((*pool)->free(odd)) << "not a slot boundary";
  auto again = (*pool)->allocate(1);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0], slots[1]);
  // Slots are registered memory: the engine reaches them.
  std::vector<std::byte> bytes(4096, std::byte{3});
  EXPECT_FALSE(engine->write(again[0], 0, bytes));
  EXPECT_EQ((*(*pool)->slot_memory(again[0]))[4095], std::byte{3});
}

TEST(dram_pool, destruction_revokes_handles) {
  auto engine = *transport::transfer_engine::create_local(1);
  auto pool = dram_pool::create(engine, 0, 64, 2);
  auto slot = (*pool)->allocate(1).at(0);
  pool->reset();
  std::vector<std::byte> bytes(64);
  EXPECT_TRUE(is(engine->read(slot, 0, bytes), errc::not_found));
}

TEST(dram_pool, bad_shapes_are_errors) {
  auto engine = *transport::transfer_engine::create_local(1);
  EXPECT_FALSE(dram_pool::create(engine, 0, 0, 4));
  EXPECT_FALSE(dram_pool::create(engine, 0, 64, 0));
}

} // namespace
} // namespace crescent::storage
