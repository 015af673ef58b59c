#include "messages/errors.hpp"
#include "storage/block_key.hpp"
#include "storage/dram_pool.hpp"
#include "storage/metadata_store.hpp"

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
  EXPECT_EQ(chain_block_keys(std::span{a}.first(47), 16, 7).size(), 2u) << "full blocks only";
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

struct metadata_fixture : ::testing::Test {
  std::filesystem::path dir = std::filesystem::temp_directory_path() /
                              ("crescent-md-" + std::to_string(::getpid()) + "-" +
                               ::testing::UnitTest::GetInstance()->current_test_info()->name());
  void SetUp() override { std::filesystem::remove_all(dir); }
  void TearDown() override { std::filesystem::remove_all(dir); }

  static block_record record(uint64_t key) {
    block_record r;
    r.key = key;
    r.handle = {1, 5, key * 64, 64, 99};
    r.size_bytes = 64;
    return r;
  }
};

TEST_F(metadata_fixture, committed_records_survive_reopen_and_pending_do_not) {
  {
    auto md = metadata_store::open(dir.string());
    ASSERT_TRUE(md) << describe(md.error());
    std::vector<block_record> recs{record(1), record(2), record(3)};
    ASSERT_FALSE((*md)->put_pending(recs));
    EXPECT_EQ((*md)->pending_count(), 3u);
    std::vector<uint64_t> keys{1, 2}, sums{11, 22};
    ASSERT_FALSE((*md)->commit(keys, sums));
    EXPECT_EQ((*md)->complete_count(), 2u);
    EXPECT_EQ((*md)->find(2)->checksum, 22u);
  }
  auto md = metadata_store::open(dir.string());
  ASSERT_TRUE(md);
  EXPECT_EQ((*md)->complete_count(), 2u);
  EXPECT_EQ((*md)->pending_count(), 0u) << "an unfinished put is forgotten";
  auto r = (*md)->find(1);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, block_state::complete);
  EXPECT_EQ(r->handle, record(1).handle);
  EXPECT_EQ(r->checksum, 11u);
  EXPECT_FALSE((*md)->find(3));
}

TEST_F(metadata_fixture, invalid_operations_change_nothing) {
  auto md = std::move(*metadata_store::open(dir.string()));
  std::vector<block_record> recs{record(1)};
  ASSERT_FALSE(md->put_pending(recs));
  std::vector<block_record> dup{record(2), record(1)};
  EXPECT_TRUE(is(md->put_pending(dup), errc::already_exists));
  EXPECT_FALSE(md->find(2)) << "all or nothing";
  std::vector<uint64_t> unknown{7}, sum{1};
  EXPECT_TRUE(is(md->commit(unknown, sum), errc::not_found));
  std::vector<uint64_t> twice{1, 1}, sums{1, 1};
  EXPECT_TRUE(md->commit(twice, sums)) << "a key twice in one commit";
  std::vector<uint64_t> one{1};
  EXPECT_TRUE(md->commit(one, std::vector<uint64_t>{})) << "a key without checksum";
  EXPECT_EQ(md->complete_count(), 0u);
  auto erased = md->erase(one);
  ASSERT_TRUE(erased);
  EXPECT_EQ(erased->size(), 1u);
  EXPECT_FALSE(md->find(1));
}

TEST_F(metadata_fixture, unopenable_path_is_an_io_error) {
  auto md = metadata_store::open("/proc/crescent-cannot-create-this");
  ASSERT_FALSE(md);
  EXPECT_TRUE(is(md.error(), errc::io_error));
}

TEST(metadata_record, damaged_bytes_are_an_error) {
  block_record r;
  r.key = 5;
  auto bytes = encode_record(r);
  EXPECT_TRUE(decode_record(bytes));
  EXPECT_FALSE(decode_record(bytes.substr(0, bytes.size() - 8)));
  EXPECT_FALSE(decode_record("abc"));
}

} // namespace
} // namespace crescent::storage
