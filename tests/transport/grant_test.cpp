// Grants (transfer_engine::grant): a capability for a sub-range of a registered region, without
// registering memory again. On each path that checks the table (in-process, shared memory, TCP)
// a grant reaches exactly its bytes, a handle rewritten to reach other bytes is refused, and a
// revoked grant is refused, each before any byte moves.
#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/host_memory.hpp"
#include "transport/region_table.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace crescent::transport {
namespace {

using crescent::testing::random_bytes;

template <class T>
bool refused_with(const caf::expected<T>& x, errc code) {
  return !x && is(x.error(), code);
}

enum class path { local, shm, tcp };

std::string name_of(const ::testing::TestParamInfo<path>& p) {
  switch (p.param) {
  case path::local:
    return "local";
  case path::shm:
    return "shm";
  case path::tcp:
    return "tcp";
  }
  return "?";
}

constexpr uint64_t region_bytes = 1u << 20;
constexpr uint64_t block_bytes = 4096;

class grants : public ::testing::TestWithParam<path> {
 protected:
  void SetUp() override {
    if (GetParam() == path::local) {
      auto made = transfer_engine::create_local(42);
      ASSERT_TRUE(made) << describe(made.error());
      owner = initiator = *made;
    } else {
      transfer_options o;
      o.local_nodes = {1};
      o.enable_rdma = false;
      auto made = transfer_engine::create(o);
      ASSERT_TRUE(made) << describe(made.error());
      owner = *made;
      transfer_options i;
      i.local_nodes = {2};
      i.enable_shm = GetParam() == path::shm;
      i.enable_tcp = GetParam() == path::tcp;
      i.enable_rdma = false;
      made = transfer_engine::create(i);
      ASSERT_TRUE(made) << describe(made.error());
      initiator = *made;
      ASSERT_FALSE(initiator->add_peer(owner->self_info()));
    }
    auto mem = host_memory::allocate(region_bytes);
    ASSERT_TRUE(mem) << describe(mem.error());
    memory = std::move(*mem);
    auto r = owner->register_region(1, memory.data(), memory.size_bytes());
    ASSERT_TRUE(r) << describe(r.error());
    region = *r;
    std::fill_n(memory.data(), region_bytes, std::byte{0x5a});
  }

  region_handle grant_block(uint64_t index) {
    auto g = owner->grant(region.slice(index * block_bytes, block_bytes));
    EXPECT_TRUE(g) << describe(g.error());
    return g ? *g : region_handle{};
  }

  // No byte of the region changed from its fill.
  bool untouched() const {
    return std::all_of(memory.data(), memory.data() + region_bytes,
                       [](std::byte b) { return b == std::byte{0x5a}; });
  }

  std::shared_ptr<transfer_engine> owner;
  std::shared_ptr<transfer_engine> initiator;
  host_memory memory;
  region_handle region;
};

TEST_P(grants, a_grant_reaches_its_bytes) {
  const auto g = grant_block(3);
  EXPECT_NE(g.region_id, region.region_id);
  EXPECT_NE(g.access_key, region.access_key);
  EXPECT_EQ(g.offset, 0u);
  EXPECT_EQ(g.length, block_bytes);
  EXPECT_EQ(owner->grant_count(), 1u);
  auto src = random_bytes(block_bytes - 100, 7);
  auto err = initiator->write(g, 100, src);
  ASSERT_FALSE(err) << describe(err);
  EXPECT_EQ(0, std::memcmp(memory.data() + 3 * block_bytes + 100, src.data(), src.size()));
  std::vector<std::byte> back(src.size());
  err = initiator->read(g, 100, back);
  ASSERT_FALSE(err) << describe(err);
  EXPECT_EQ(back, src);
}

// What a holder of one block's grant might try to reach another block with: each is refused
// and no byte of the region changes.
TEST_P(grants, a_grant_rewritten_to_reach_other_bytes_is_refused_before_a_byte_moves) {
  const auto a = grant_block(3);
  const auto b = grant_block(4);
  std::vector<std::byte> src(64, std::byte{1});

  auto past_end = initiator->write(a, block_bytes - 8, src); // runs into block 4
  EXPECT_TRUE(is(past_end, errc::out_of_range)) << describe(past_end);

  auto widened = a;
  widened.length = 2 * block_bytes; // the handle itself claims more than the grant
  EXPECT_TRUE(is(initiator->write(widened, block_bytes, src), errc::out_of_range));

  auto moved = a;
  moved.offset = block_bytes; // the next block, as a slice of the arena would be
  moved.length = block_bytes;
  EXPECT_TRUE(is(initiator->write(moved, 0, src), errc::out_of_range));

  auto as_b = b;
  as_b.access_key = a.access_key; // b's id with a's key
  EXPECT_TRUE(is(initiator->write(as_b, 0, src), errc::access_denied));

  auto as_region = region.slice(4 * block_bytes, block_bytes);
  as_region.access_key = a.access_key; // the whole region's id with a grant's key
  EXPECT_TRUE(is(initiator->write(as_region, 0, src), errc::access_denied));

  EXPECT_TRUE(untouched());
}

TEST_P(grants, a_revoked_grant_is_refused_before_a_byte_moves) {
  const auto a = grant_block(5);
  const auto b = grant_block(6);
  std::vector<std::byte> src(64, std::byte{1});
  ASSERT_FALSE(owner->revoke(a));
  EXPECT_EQ(owner->grant_count(), 1u);
  auto err = initiator->write(a, 0, src);
  EXPECT_TRUE(is(err, errc::not_found)) << describe(err);
  std::vector<std::byte> back(64);
  EXPECT_TRUE(is(initiator->read(a, 0, back), errc::not_found));
  EXPECT_TRUE(untouched());
  EXPECT_TRUE(is(owner->revoke(a), errc::not_found)); // twice
  // A grant made after the revocation, for the same bytes, is another capability: the old
  // handle stays refused.
  const auto again = grant_block(5);
  EXPECT_NE(again.region_id, a.region_id);
  EXPECT_TRUE(is(initiator->write(a, 0, src), errc::not_found));
  EXPECT_FALSE(initiator->write(again, 0, src));
  EXPECT_FALSE(initiator->write(b, 0, src)); // the other grant is untouched by all of it
}

TEST_P(grants, unregistering_the_region_ends_its_grants) {
  const auto a = grant_block(1);
  const auto b = grant_block(2);
  ASSERT_FALSE(owner->unregister_region(region));
  EXPECT_EQ(owner->grant_count(), 0u);
  std::vector<std::byte> src(64, std::byte{1});
  EXPECT_TRUE(is(initiator->write(a, 0, src), errc::not_found));
  EXPECT_TRUE(is(initiator->write(b, 0, src), errc::not_found));
  EXPECT_TRUE(is(owner->revoke(a), errc::not_found));
  EXPECT_TRUE(untouched());
}

INSTANTIATE_TEST_SUITE_P(paths, grants, ::testing::Values(path::local, path::shm, path::tcp),
                         name_of);

// -- the engine's and the table's refusals --------------------------------------------------

TEST(grant, ends_only_what_its_caller_meant) {
  auto engine = *transfer_engine::create_local(1);
  std::vector<std::byte> memory(8 * block_bytes);
  auto region = *engine->register_region(0, memory.data(), memory.size());
  auto g = engine->grant(region.slice(block_bytes, block_bytes));
  ASSERT_TRUE(g) << describe(g.error());
  // A region is not revoked, a grant is not unregistered: either would end more or less than
  // the caller meant.
  EXPECT_TRUE(is(engine->revoke(region), errc::invalid_argument));
  EXPECT_TRUE(is(engine->unregister_region(*g), errc::invalid_argument));
  // A grant is cut from its region's handle, never from another grant.
  EXPECT_TRUE(refused_with(engine->grant(*g), errc::invalid_argument));
  auto wrong_key = region;
  ++wrong_key.access_key;
  EXPECT_TRUE(refused_with(engine->grant(wrong_key), errc::access_denied));
  auto outside = region;
  outside.offset = memory.size() - 10;
  outside.length = 20;
  EXPECT_TRUE(refused_with(engine->grant(outside), errc::out_of_range));
  auto empty = region.slice(0, 0);
  EXPECT_TRUE(refused_with(engine->grant(empty), errc::invalid_argument));
  auto other_node = region;
  other_node.node = 7;
  auto remote = transfer_engine::create([] {
    transfer_options o;
    o.local_nodes = {0};
    o.enable_tcp = false;
    o.enable_shm = false;
    o.enable_rdma = false;
    return o;
  }());
  ASSERT_TRUE(remote);
  EXPECT_TRUE(refused_with((*remote)->grant(other_node), errc::invalid_argument));
  EXPECT_FALSE(engine->revoke(*g));
  EXPECT_FALSE(engine->unregister_region(region));
}

TEST(grant, counts_against_the_region_table) {
  auto created = region_table::create(4);
  ASSERT_TRUE(created) << describe(created.error());
  auto& table = *created;
  std::vector<std::byte> memory(4 * block_bytes);
  auto region = table->insert(1, memory.data(), memory.size(), 11);
  ASSERT_TRUE(region);
  std::vector<region_handle> held;
  for (uint64_t i = 0; i < 3; ++i) {
    auto g = table->insert_grant(region->slice(i * block_bytes, block_bytes), 100 + i);
    ASSERT_TRUE(g) << describe(g.error());
    held.push_back(*g);
    EXPECT_EQ(table->registered_id(*g), region->region_id);
  }
  auto full = table->insert_grant(region->slice(3 * block_bytes, block_bytes), 200);
  ASSERT_FALSE(full);
  EXPECT_TRUE(refused_with(full, errc::limit_exceeded)) << describe(full.error());
  ASSERT_FALSE(table->remove(held[1], region_table::slot_kind::grant));
  EXPECT_EQ(table->grant_count(), 2u);
  EXPECT_EQ(table->registered_id(held[1]), 0u);
  EXPECT_TRUE(table->insert_grant(region->slice(3 * block_bytes, block_bytes), 200));
}

// Other processes see a grant as a region of exactly its bytes: the shared table's slot says
// where they are, and a reader's lookup refuses what lies outside.
TEST(grant, other_processes_see_exactly_its_bytes) {
  auto created = region_table::create(8);
  ASSERT_TRUE(created) << describe(created.error());
  auto& table = *created;
  auto memory = host_memory::allocate(4 * block_bytes);
  ASSERT_TRUE(memory) << describe(memory.error());
  auto region = table->insert(1, memory->data(), memory->size_bytes(), 11);
  ASSERT_TRUE(region);
  auto g = table->insert_grant(region->slice(2 * block_bytes, block_bytes), 77);
  ASSERT_TRUE(g);
  auto reader = remote_region_table::open(getpid(), table->fd(), table->size_bytes());
  ASSERT_TRUE(reader) << describe(reader.error());
  auto parent = (*reader)->lookup(*region, 0, 1);
  auto e = (*reader)->lookup(*g, 0, block_bytes);
  ASSERT_TRUE(parent && e);
  EXPECT_EQ(e->length, block_bytes);
  EXPECT_EQ(e->address, parent->address + 2 * block_bytes);
  EXPECT_EQ(e->segment_id, parent->segment_id);
  EXPECT_NE(parent->segment_id, 0u); // host_memory is a shared segment
  EXPECT_EQ(e->segment_offset, parent->segment_offset + 2 * block_bytes);
  EXPECT_TRUE(refused_with((*reader)->lookup(*g, 1, block_bytes), errc::out_of_range));
  ASSERT_FALSE(table->remove(*region));
  EXPECT_TRUE(refused_with((*reader)->lookup(*g, 0, 1), errc::not_found));
}

} // namespace
} // namespace crescent::transport
