// A peer announced again while slices to it are in flight (add_peer for known nodes, as a
// directory refresh does): the same server keeps its connections; another one takes over, the
// old connections' slices fail over to it, and nothing is lost or deadlocked on the way.
#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace crescent::transport {
namespace {

struct peer_replacement : ::testing::Test {
  void SetUp() override {
    transfer_options o;
    o.local_nodes = {1};
    owner = *transfer_engine::create(o);
    transfer_options i;
    i.local_nodes = {2};
    i.enable_shm = false;
    i.enable_rdma = false;
    i.tcp_slice_bytes = 64u << 10; // many slices in flight on every connection
    initiator = *transfer_engine::create(i);
    ASSERT_FALSE(initiator->add_peer(owner->self_info()));
    memory = std::move(*host_memory::allocate(region_bytes));
    region = *owner->register_region(1, memory.data(), memory.size_bytes());
    auto bytes = testing::random_bytes(region_bytes, 11);
    std::memcpy(memory.data(), bytes.data(), bytes.size());
  }

  // Reads of the whole region in 1 MiB operations, into `out`, as one batch due in 20 s.
  batch_id read_all(std::vector<std::byte>& out) {
    std::vector<transfer_op> ops;
    for (uint64_t at = 0; at < region_bytes; at += 1u << 20)
      ops.push_back({op_kind::read, std::span{out}.subspan(at, 1u << 20), region, at});
    deadline = clock_type::now() + std::chrono::seconds(20);
    auto id = initiator->submit(ops, deadline);
    EXPECT_TRUE(id) << describe(id.error());
    return *id;
  }

  static constexpr uint64_t region_bytes = 64u << 20;
  clock_type::time_point deadline;
  std::shared_ptr<transfer_engine> owner;
  std::shared_ptr<transfer_engine> initiator;
  host_memory memory;
  region_handle region;
};

TEST_F(peer_replacement, re_adding_a_peer_mid_batch_loses_nothing) {
  std::vector<std::byte> out(region_bytes);
  const auto id = read_all(out);
  // The same server again, then "another process" at the same address (another pid): the
  // second replaces every connection while the batch runs.
  auto info = owner->self_info();
  for (int round = 0; round < 4; ++round) {
    EXPECT_FALSE(initiator->add_peer(info));
    auto moved = info;
    moved.pid = info.pid + 1 + round;
    EXPECT_FALSE(initiator->add_peer(moved));
  }
  auto results = initiator->wait(id);
  ASSERT_TRUE(results);
  EXPECT_LT(clock_type::now(), deadline);
  for (auto& r : *results)
    ASSERT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_EQ(std::memcmp(out.data(), memory.data(), region_bytes), 0);
}

TEST_F(peer_replacement, a_removed_peer_fails_what_is_in_flight_and_then_has_no_route) {
  std::vector<std::byte> out(region_bytes);
  const auto id = read_all(out);
  initiator->remove_peer(1);
  auto results = initiator->wait(id);
  ASSERT_TRUE(results);
  EXPECT_LT(clock_type::now(), deadline);
  for (auto& r : *results)
    EXPECT_NE(r.state, op_state::pending);
  std::vector<std::byte> one(8);
  EXPECT_TRUE(initiator->read(region, 0, one)); // an error: no route to node 1 any more
}

TEST(peer_replacement_nodes, a_process_replaced_for_one_node_still_serves_its_others) {
  transfer_options o;
  o.local_nodes = {1, 2};
  auto owner = *transfer_engine::create(o);
  std::vector<std::byte> one(4096, std::byte{1}), two(4096, std::byte{2});
  auto r1 = *owner->register_region(1, one.data(), one.size());
  auto r2 = *owner->register_region(2, two.data(), two.size());
  transfer_options i;
  i.local_nodes = {3};
  i.enable_shm = false;
  i.enable_rdma = false;
  auto initiator = *transfer_engine::create(i);
  auto info = owner->self_info();
  ASSERT_FALSE(initiator->add_peer(info));
  // Node 1 now "in another process" (same server here, another pid): node 2 keeps its route.
  auto moved = info;
  moved.nodes = {1};
  moved.pid = info.pid + 1;
  ASSERT_FALSE(initiator->add_peer(moved));
  std::vector<std::byte> out(4096);
  ASSERT_FALSE(initiator->read(r2, 0, out));
  EXPECT_EQ(out, two);
  ASSERT_FALSE(initiator->read(r1, 0, out));
  EXPECT_EQ(out, one);
}

} // namespace
} // namespace crescent::transport
