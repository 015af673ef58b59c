// The window of one TCP connection: once full, the sender waits for half of it to drain and
// then sends a burst. A batch many windows long, on one connection, must still finish, every
// byte in its place: a reopening the sender misses would hang it until its deadline.
#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/host_memory.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <cstring>

namespace crescent::transport {
namespace {

using crescent::testing::random_bytes;

TEST(tcp_window, a_batch_many_windows_long_on_one_connection_completes_in_place) {
  transfer_options o;
  o.local_nodes = {1};
  auto owner = transfer_engine::create(o);
  ASSERT_TRUE(owner) << describe(owner.error());
  transfer_options i;
  i.local_nodes = {2};
  i.enable_shm = false;
  i.enable_rdma = false;
  i.tcp_connections_per_peer = 1;
  auto initiator = transfer_engine::create(i);
  ASSERT_TRUE(initiator) << describe(initiator.error());
  ASSERT_FALSE((*initiator)->add_peer((*owner)->self_info()));

  // Small operations, so that the window, not the socket, is what fills; odd sizes, so that a
  // response matched to the wrong slice shows.
  constexpr size_t ops_count = 20 * tcp::connection::window_slices;
  constexpr uint64_t stride_bytes = 4096;
  auto memory = host_memory::allocate(ops_count * stride_bytes);
  ASSERT_TRUE(memory);
  auto region = (*owner)->register_region(1, memory->data(), memory->size_bytes());
  ASSERT_TRUE(region);
  auto src = random_bytes(ops_count * stride_bytes, 11);
  std::vector<transfer_op> writes;
  for (size_t k = 0; k < ops_count; ++k) {
    const uint64_t at = k * stride_bytes;
    writes.push_back({op_kind::write, {src.data() + at, 1 + k % stride_bytes}, *region, at});
  }
  auto run = [&](const std::vector<transfer_op>& ops) {
    auto id = (*initiator)->submit(ops, clock_type::now() + std::chrono::seconds(20));
    ASSERT_TRUE(id) << describe(id.error());
    auto results = (*initiator)->wait(*id);
    ASSERT_TRUE(results);
    for (size_t k = 0; k < results->size(); ++k)
      ASSERT_EQ((*results)[k].state, op_state::completed)
          << "op " << k << ": " << describe((*results)[k].reason);
  };
  run(writes);
  for (size_t k = 0; k < ops_count; ++k)
    ASSERT_EQ(0, std::memcmp(memory->data() + k * stride_bytes, src.data() + k * stride_bytes,
                             1 + k % stride_bytes))
        << "op " << k;

  std::vector<std::byte> back(src.size());
  std::vector<transfer_op> reads;
  for (const auto& w : writes)
    reads.push_back(
        {op_kind::read, {back.data() + w.remote_offset, w.local.size()}, *region, w.remote_offset});
  run(reads);
  for (size_t k = 0; k < ops_count; ++k)
    ASSERT_EQ(0, std::memcmp(back.data() + k * stride_bytes, src.data() + k * stride_bytes,
                             1 + k % stride_bytes))
        << "op " << k;
}

} // namespace
} // namespace crescent::transport
