// How one TCP connection sends. Once its window is full, the sender waits for half of it to
// drain and then sends a burst: a batch many windows long must still finish, every byte in its
// place (a reopening the sender misses would hang it until its deadline). Reads of a new batch
// go out from the submitting thread when the sender is idle, and the sender finishes what the
// socket did not take: several threads mixing reads and writes on one connection must not
// interleave their requests' bytes. The last write of a batch asks the server for the
// acknowledgements it holds.
#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/host_memory.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

namespace crescent::transport {
namespace {

using crescent::testing::random_bytes;

// node 1 owns a region of `bytes`; node 2 reaches it over TCP only, through one connection.
struct one_connection {
  explicit one_connection(uint64_t bytes) {
    transfer_options o;
    o.local_nodes = {1};
    auto made = transfer_engine::create(o);
    if (!made) {
      ADD_FAILURE() << describe(made.error());
      return;
    }
    owner = *made;
    transfer_options i;
    i.local_nodes = {2};
    i.enable_shm = false;
    i.enable_rdma = false;
    i.tcp_connections_per_peer = 1;
    i.tcp_slice_bytes = 4096; // many slices per operation, reads and writes in one queue
    // Requests out of step make the server drop the connection: with one attempt per slice
    // that fails the test, where a retry on a new connection would hide it.
    i.slice_attempts_max = 1;
    made = transfer_engine::create(i);
    if (!made) {
      ADD_FAILURE() << describe(made.error());
      return;
    }
    if (auto err = (*made)->add_peer(owner->self_info())) {
      ADD_FAILURE() << describe(err);
      return;
    }
    auto m = host_memory::allocate(bytes);
    if (!m) {
      ADD_FAILURE() << describe(m.error());
      return;
    }
    memory = std::move(*m);
    auto r = owner->register_region(1, memory.data(), memory.size_bytes());
    if (!r) {
      ADD_FAILURE() << describe(r.error());
      return;
    }
    region = *r;
    initiator = *made; // last: set means ready
  }

  // Submits and waits; whether every operation completed.
  bool run(std::span<const transfer_op> ops) {
    auto id = initiator->submit(ops, clock_type::now() + std::chrono::seconds(20));
    auto results = id ? initiator->wait(*id) : caf::expected<std::vector<op_result>>{id.error()};
    if (!results) {
      ADD_FAILURE() << describe(results.error());
      return false;
    }
    for (size_t k = 0; k < results->size(); ++k)
      if ((*results)[k].state != op_state::completed) {
        ADD_FAILURE() << "op " << k << ": " << to_string((*results)[k].state) << ": "
                      << describe((*results)[k].reason);
        return false;
      }
    return true;
  }

  // Memory first: the engines, which may still serve it, go before it.
  host_memory memory;
  std::shared_ptr<transfer_engine> owner;
  std::shared_ptr<transfer_engine> initiator;
  region_handle region;
};

TEST(socket_io, bytes_after_copies_what_a_partial_send_left) {
  auto a = random_bytes(64, 1);
  auto b = random_bytes(100, 2);
  std::vector<iovec> iov{{a.data(), a.size()}, {nullptr, 0}, {b.data(), b.size()}};
  std::vector<std::byte> all = a;
  all.insert(all.end(), b.begin(), b.end());
  for (uint64_t sent : {0u, 1u, 63u, 64u, 65u, 163u, 164u}) {
    auto rest = tcp::bytes_after(iov, sent);
    EXPECT_EQ(rest, std::vector<std::byte>(all.begin() + sent, all.end())) << sent;
  }
}

class tcp_inline_send : public ::testing::TestWithParam<uint64_t> {
 protected:
  using hooks = tcp::connection::test_hooks;
  void SetUp() override { hooks::inline_send_bytes_max = GetParam(); }
  void TearDown() override { hooks::inline_send_bytes_max = UINT64_MAX; }
};

// All of a flush from the submitting thread; none of it (the sender writes it all); and parts
// of it, cut inside a header (each 72 bytes) and after the first few.
INSTANTIATE_TEST_SUITE_P(caps, tcp_inline_send, ::testing::Values(UINT64_MAX, 0, 1, 100, 300));

TEST_P(tcp_inline_send, threads_mixing_reads_and_writes_share_one_connection_in_step) {
  constexpr int threads = 4;
  constexpr uint64_t share_bytes = 1u << 20;
  one_connection c{threads * share_bytes};
  ASSERT_TRUE(c.initiator);
  const uint64_t inline_before = hooks::inline_sends, handed_before = hooks::handed_to_sender;
  std::atomic<bool> failed{false};
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(t + 1);
      const uint64_t base = t * share_bytes;
      for (int round = 0; round < 60 && !failed; ++round) {
        // A write batch of a few odd-sized operations, then a batch reading them back.
        std::vector<std::vector<std::byte>> data(1 + rng() % 6);
        std::vector<std::vector<std::byte>> back;
        back.reserve(data.size()); // the reads' spans point into it
        std::vector<transfer_op> writes, reads;
        uint64_t at = base + rng() % 4096; // 6 x 48 KiB past it stays in this thread's share
        for (auto& d : data) {
          d = random_bytes(1 + rng() % (48u << 10), rng());
          writes.push_back({op_kind::write, d, c.region, at});
          back.emplace_back(d.size());
          reads.push_back({op_kind::read, back.back(), c.region, at});
          at += d.size();
        }
        // A failure stops every thread: the next rounds would wait out their deadlines.
        if (!c.run(writes) || !c.run(reads))
          failed = true;
        else if (back != data) {
          ADD_FAILURE() << "thread " << t << ", round " << round << ": bytes differ";
          failed = true;
        }
      }
    });
  for (auto& w : workers)
    w.join();
  ASSERT_FALSE(failed);
  // The path under test must have run. With 4 threads the sender may have been busy at every
  // flush: single reads on an idle connection then take it.
  std::vector<std::byte> one(100);
  std::vector<transfer_op> read{{op_kind::read, one, c.region, 0}};
  for (int k = 0; k < 1000 && hooks::inline_sends == inline_before; ++k)
    ASSERT_TRUE(c.run(read));
  EXPECT_GT(hooks::inline_sends, inline_before);
  if (GetParam() < sizeof(tcp::request_header)) {
    EXPECT_GT(hooks::handed_to_sender, handed_before) << "the sender finished none";
  }
}

TEST(tcp_window, a_batch_many_windows_long_on_one_connection_completes_in_place) {
  // Small operations, so that the window, not the socket, is what fills; odd sizes, so that a
  // response matched to the wrong slice shows.
  constexpr size_t ops_count = 20 * tcp::connection::window_slices;
  constexpr uint64_t stride_bytes = 4096;
  one_connection c{ops_count * stride_bytes};
  ASSERT_TRUE(c.initiator);
  auto src = random_bytes(ops_count * stride_bytes, 11);
  std::vector<transfer_op> writes;
  for (size_t k = 0; k < ops_count; ++k) {
    const uint64_t at = k * stride_bytes;
    writes.push_back({op_kind::write, {src.data() + at, 1 + k % stride_bytes}, c.region, at});
  }
  ASSERT_TRUE(c.run(writes));
  for (size_t k = 0; k < ops_count; ++k)
    ASSERT_EQ(0, std::memcmp(c.memory.data() + k * stride_bytes, src.data() + k * stride_bytes,
                             1 + k % stride_bytes))
        << "op " << k;

  std::vector<std::byte> back(src.size());
  std::vector<transfer_op> reads;
  for (const auto& w : writes)
    reads.push_back({op_kind::read,
                     {back.data() + w.remote_offset, w.local.size()},
                     c.region,
                     w.remote_offset});
  ASSERT_TRUE(c.run(reads));
  for (size_t k = 0; k < ops_count; ++k)
    ASSERT_EQ(0, std::memcmp(back.data() + k * stride_bytes, src.data() + k * stride_bytes,
                             1 + k % stride_bytes))
        << "op " << k;
}

// 4 KiB operations, one slice each: a batch of 16 leaves in one burst, one of 40 in two (at
// most 32 a burst). Each asks for acknowledgements at most once, behind its last write; reads
// never do. (A sender that wakes while a batch is still launching takes what is queued so far,
// unmarked; should it take all of it before the launch ends, none is marked. So the count is at
// most one per batch, and at least one over the rounds.)
TEST(tcp_acks, a_batch_of_writes_asks_for_acknowledgements_behind_its_last_slice_only) {
  using hooks = tcp::connection::test_hooks;
  constexpr uint64_t op_bytes = 4096;
  constexpr int rounds = 10;
  one_connection c{64 * op_bytes};
  ASSERT_TRUE(c.initiator);
  auto src = random_bytes(64 * op_bytes, 5);
  const uint64_t first = hooks::acks_requested;
  for (int round = 0; round < rounds; ++round)
    for (size_t count : {16u, 40u}) {
      std::vector<transfer_op> writes;
      for (size_t k = 0; k < count; ++k)
        writes.push_back(
            {op_kind::write, {src.data() + k * op_bytes, op_bytes}, c.region, k * op_bytes});
      const uint64_t before = hooks::acks_requested;
      ASSERT_TRUE(c.run(writes));
      EXPECT_LE(hooks::acks_requested - before, 1u) << count << " writes, round " << round;
    }
  EXPECT_GE(hooks::acks_requested - first, 1u) << "no batch asked";
  std::vector<std::byte> back(40 * op_bytes);
  std::vector<transfer_op> reads;
  for (size_t k = 0; k < 40; ++k)
    reads.push_back(
        {op_kind::read, {back.data() + k * op_bytes, op_bytes}, c.region, k * op_bytes});
  const uint64_t before = hooks::acks_requested;
  ASSERT_TRUE(c.run(reads));
  EXPECT_EQ(hooks::acks_requested, before);
  EXPECT_EQ(0, std::memcmp(back.data(), src.data(), back.size()));
}

} // namespace
} // namespace crescent::transport
