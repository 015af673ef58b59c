#include "messages/errors.hpp"
#include "storage/block_key.hpp"
#include "storage/dram_pool.hpp"
#include "support/block_keys.hpp"

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
  auto ka = chain_block_keys(a, 16, 7_key);
  auto kb = chain_block_keys(b, 16, 7_key);
  ASSERT_EQ(ka.size(), 4u);
  EXPECT_EQ(ka[0], kb[0]);
  EXPECT_EQ(ka[1], kb[1]);
  EXPECT_NE(ka[2], kb[2]);
  EXPECT_NE(ka[3], kb[3]); // block 3 is equal, but its prefix is not
  EXPECT_NE(chain_block_keys(a, 16, 8_key)[0], ka[0]) << "the root separates models";
  // A partial last block has its own key, distinct from the full block a longer prompt has
  // there, and from a partial block of another length.
  auto partial = chain_block_keys(std::span{a}.first(47), 16, 7_key);
  ASSERT_EQ(partial.size(), 3u);
  EXPECT_EQ(partial[1], ka[1]);
  EXPECT_NE(partial[2], ka[2]);
  EXPECT_NE(chain_block_keys(std::span{a}.first(46), 16, 7_key)[2], partial[2]);
  EXPECT_TRUE(chain_block_keys(std::span{a}.first(0), 16, 7_key).empty());
}

// The definition pinned by a value computed elsewhere (Python's hashlib): the first 16 bytes of
// SHA-256(0x01, root hi and lo big-endian, tokens little-endian), hi first. A change here moves
// every stored block to a new key, so it must be deliberate.
TEST(block_key, a_key_is_the_first_128_bits_of_sha_256_over_its_parent_and_tokens) {
  std::vector<uint32_t> tokens(16);
  std::iota(tokens.begin(), tokens.end(), 0u);
  const block_key expected{0x9d63199159bfb8dbull, 0x83e7b14f2741645aull};
  EXPECT_EQ(chain_key(7_key, tokens), expected);
  EXPECT_EQ(chain_block_keys(tokens, 16, 7_key), std::vector<block_key>{expected});
  EXPECT_EQ(to_string(expected), "9d63199159bfb8db83e7b14f2741645a");
  char bytes[16];
  store_be(expected, bytes);
  EXPECT_EQ(static_cast<uint8_t>(bytes[0]), 0x9d);
  EXPECT_EQ(static_cast<uint8_t>(bytes[15]), 0x5a);
  EXPECT_EQ(load_be(bytes), expected);
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
