// The RDMA path between two engines in one process, both with RDMA, through the machine's
// RDMA devices (the NIC loops packets back to itself): the integrity, refusal, deadline and
// peer-loss checks the TCP path has. Where no device exists every test skips with the reason.
//
// The initiator has no shared-memory path, so its paths to the owner are RDMA then TCP; the
// metrics show which carried the bytes.
#include "messages/errors.hpp"
#include "support/integrity_cases.hpp"
#include "support/random_bytes.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>

namespace crescent::transport {
namespace {

using namespace std::chrono_literals;

constexpr uint64_t region_bytes = test::integrity_region_bytes;

using crescent::testing::fill_random;

// Why RDMA cannot be tested here, or none.
caf::error rdma_unavailable() {
  transfer_options o;
  o.local_nodes = {99};
  auto probe = transfer_engine::create(o);
  if (!probe)
    return std::move(probe.error());
  return (*probe)->rdma_status();
}

class rdma_engines : public ::testing::Test {
 protected:
  void SetUp() override {
    if (auto why = rdma_unavailable())
      GTEST_SKIP() << "no RDMA here: " << describe(why);
    transfer_options o;
    o.local_nodes = {1};
    o.enable_shm = false;
    auto made = transfer_engine::create(o);
    ASSERT_TRUE(made) << describe(made.error());
    owner = *made;
    transfer_options i;
    i.local_nodes = {2};
    i.enable_shm = false;
    made = transfer_engine::create(i);
    ASSERT_TRUE(made) << describe(made.error());
    initiator = *made;
    ASSERT_FALSE(initiator->add_peer(owner->self_info()));
    ASSERT_EQ(initiator->paths(1), (std::vector<std::string>{"rdma", "tcp"}));
    remote_memory = std::move(*host_memory::allocate(region_bytes));
    auto r = owner->register_region(1, remote_memory.data(), remote_memory.size_bytes());
    ASSERT_TRUE(r) << describe(r.error());
    region = *r;
    // RDMA moves registered memory only: the initiator's buffers are a region of its own.
    local_memory = std::move(*host_memory::allocate(region_bytes));
    r = initiator->register_region(2, local_memory.data(), local_memory.size_bytes());
    ASSERT_TRUE(r) << describe(r.error());
    local_region = *r;
  }

  uint64_t bytes_on(const std::string& backend) const {
    uint64_t n = 0;
    for (const auto& m : initiator->metrics())
      if (m.backend == backend)
        n += m.bytes_read + m.bytes_written;
    return n;
  }

  std::span<std::byte> local(uint64_t offset, uint64_t length) {
    return {local_memory.data() + offset, length};
  }

  // Memory first: the engines (and their memory registrations) go before it.
  host_memory remote_memory;
  host_memory local_memory;
  std::shared_ptr<transfer_engine> owner;
  std::shared_ptr<transfer_engine> initiator;
  region_handle region;
  region_handle local_region;
};

TEST_F(rdma_engines, random_data_integrity_from_one_byte_to_64_mib) {
  uint64_t seed = 1;
  for (auto size : test::integrity_sizes)
    for (auto offset : test::integrity_offsets) {
      if (offset + size > region_bytes)
        continue;
      SCOPED_TRACE(std::to_string(size) + " bytes at " + std::to_string(offset));
      const uint64_t at = (offset * 7) % 64; // unaligned on the local side too
      auto src = local(at, size);
      fill_random(src.data(), size, seed++);
      auto err = initiator->write(region, offset, src);
      ASSERT_FALSE(err) << describe(err);
      ASSERT_EQ(0, std::memcmp(remote_memory.data() + offset, src.data(), size));
      std::vector<std::byte> expected(src.begin(), src.end());
      std::memset(src.data(), 0, size);
      err = initiator->read(region, offset, src);
      ASSERT_FALSE(err) << describe(err);
      ASSERT_EQ(0, std::memcmp(src.data(), expected.data(), size));
    }
  EXPECT_GT(bytes_on("rdma"), 0u);
  EXPECT_EQ(bytes_on("tcp"), 0u) << "every byte should have taken RDMA";
}

TEST_F(rdma_engines, batches_spread_over_queue_pairs_and_keep_every_byte) {
  std::mt19937_64 rng{7};
  std::vector<transfer_op> writes;
  uint64_t at = 5;
  for (int i = 0; i < 40; ++i) {
    const uint64_t n = 1 + rng() % (300u << 10);
    fill_random(local_memory.data() + at, n, rng());
    writes.push_back({op_kind::write, local(at, n), region, at + 3});
    at += n + rng() % 1000;
  }
  auto id = initiator->submit(writes, clock_type::now() + 30s);
  ASSERT_TRUE(id);
  auto results = initiator->wait(*id);
  ASSERT_TRUE(results);
  for (auto& r : *results)
    ASSERT_EQ(r.state, op_state::completed) << describe(r.reason);
  for (auto& w : writes)
    ASSERT_EQ(0,
              std::memcmp(remote_memory.data() + w.remote_offset, w.local.data(), w.local.size()));
  // Read everything back into the second half of the local region.
  std::vector<transfer_op> reads;
  const uint64_t back = 32u << 20;
  for (auto& w : writes)
    reads.push_back({op_kind::read,
                     local(back + (w.local.data() - local_memory.data()), w.local.size()), region,
                     w.remote_offset});
  id = initiator->submit(reads, clock_type::now() + 30s);
  results = initiator->wait(*id);
  ASSERT_TRUE(results);
  for (size_t i = 0; i < reads.size(); ++i) {
    ASSERT_EQ((*results)[i].state, op_state::completed) << describe((*results)[i].reason);
    ASSERT_EQ(0, std::memcmp(reads[i].local.data(), writes[i].local.data(), writes[i].local.size()))
        << "op " << i;
  }
  EXPECT_EQ(bytes_on("tcp"), 0u);
}

TEST_F(rdma_engines, concurrent_batches_from_several_threads) {
  constexpr int threads = 4;
  constexpr uint64_t share = region_bytes / threads;
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        const uint64_t n = (1u << 20) + t * 977 + round;
        const uint64_t at = t * share + round * 13;
        auto src = local(at, n);
        fill_random(src.data(), n, t * 100 + round);
        std::vector<std::byte> expected(src.begin(), src.end());
        std::vector<transfer_op> w{{op_kind::write, src, region, at}};
        auto id = initiator->submit(w, clock_type::now() + 30s);
        auto r = initiator->wait(*id);
        std::memset(src.data(), 0, n);
        std::vector<transfer_op> rd{{op_kind::read, src, region, at}};
        id = initiator->submit(rd, clock_type::now() + 30s);
        auto r2 = initiator->wait(*id);
        if (!r || !r2 || (*r)[0].state != op_state::completed ||
            (*r2)[0].state != op_state::completed ||
            std::memcmp(src.data(), expected.data(), n) != 0)
          ++failures;
      }
    });
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(bytes_on("tcp"), 0u);
}

TEST_F(rdma_engines, unregistered_buffers_and_checksums_take_tcp) {
  std::vector<std::byte> plain(100000, std::byte{9});
  ASSERT_FALSE(initiator->write(region, 0, plain)); // not registered memory
  EXPECT_EQ(remote_memory.data()[99999], std::byte{9});
  const uint64_t after_plain = bytes_on("tcp");
  EXPECT_EQ(after_plain, plain.size());
  auto checked = local(0, 5000);
  fill_random(checked.data(), checked.size(), 3);
  std::vector<transfer_op> ops{{op_kind::write, checked, region, 200000, true}};
  auto id = initiator->submit(ops, clock_type::now() + 30s);
  auto results = initiator->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ((*results)[0].state, op_state::completed) << describe((*results)[0].reason);
  EXPECT_EQ(bytes_on("tcp"), after_plain + checked.size());
  EXPECT_EQ(0, std::memcmp(remote_memory.data() + 200000, checked.data(), checked.size()));
}

TEST_F(rdma_engines, injected_faults_fail_slices_or_change_what_lands_and_never_the_source) {
  // What crescent chaos injects, as on the other paths (paths_test.cpp): a corrupted WRITE is
  // gathered with a changed copy of its window, a corrupted READ changes once landed.
  auto src = local(0, 200000);
  fill_random(src.data(), src.size(), 21);
  const std::vector<std::byte> sent(src.begin(), src.end());
  std::memset(remote_memory.data(), 0, src.size());
  auto run = [&](op_kind kind, std::span<std::byte> buf) {
    std::vector<transfer_op> ops{{kind, buf, region, 0, false}};
    auto id = initiator->submit(ops, clock_type::now() + 30s);
    auto results = initiator->wait(*id);
    return results ? (*results)[0] : op_result{};
  };
  initiator->set_fault_hook([](const slice_view&) { return slice_fault::fail; });
  auto r = run(op_kind::write, src);
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_NE(describe(r.reason).find("injected fault"), std::string::npos) << describe(r.reason);

  initiator->set_fault_hook([](const slice_view&) { return slice_fault::corrupt; });
  r = run(op_kind::write, src);
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_EQ(0, std::memcmp(src.data(), sent.data(), sent.size())) << "the source stays";
  size_t changed = 0;
  for (size_t i = 0; i < sent.size(); ++i)
    changed += remote_memory.data()[i] != sent[i] ? 1 : 0;
  EXPECT_GT(changed, 0u) << "a corrupted write lands changed";
  EXPECT_EQ(changed % 8, 0u) << "8 bytes of each slice";

  initiator->set_fault_hook({});
  ASSERT_FALSE(initiator->write(region, 0, src));
  initiator->set_fault_hook([](const slice_view&) { return slice_fault::corrupt; });
  auto back = local(300000, sent.size());
  r = run(op_kind::read, back);
  initiator->set_fault_hook({});
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_NE(0, std::memcmp(back.data(), sent.data(), sent.size())) << "a read changes on arrival";
  EXPECT_EQ(0, std::memcmp(remote_memory.data(), sent.data(), sent.size())) << "its source not";
  EXPECT_GT(bytes_on("rdma"), 0u);
}

TEST_F(rdma_engines, refusals_are_explicit_and_write_nothing) {
  std::memset(remote_memory.data(), 0, 1 << 20);
  auto src = local(0, 100);
  fill_random(src.data(), src.size(), 3);
  ASSERT_FALSE(initiator->read(region, 1 << 20, local(4096, 8))); // the region is now cached
  auto forged = region;
  forged.access_key ^= 0xff;
  auto err = initiator->write(forged, 0, src);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  auto grown = region.slice(0, 64);
  grown.offset = region_bytes - 32; // a handle reaching past the end of its region
  err = initiator->write(grown, 0, src.first(64));
  EXPECT_TRUE(is(err, errc::out_of_range)) << describe(err);
  auto stale = owner->register_region(1, remote_memory.data(), 1 << 20);
  ASSERT_TRUE(stale);
  ASSERT_FALSE(owner->unregister_region(*stale));
  err = initiator->write(*stale, 0, src);
  EXPECT_TRUE(is(err, errc::not_found)) << describe(err);
  EXPECT_TRUE(std::all_of(remote_memory.data(), remote_memory.data() + (1 << 20),
                          [](std::byte b) { return b == std::byte{0}; }));
  EXPECT_EQ(bytes_on("tcp"), 0u) << "refusals come from the owner over the control channel";
}

TEST_F(rdma_engines, a_region_unregistered_after_use_is_not_found) {
  auto r = owner->register_region(1, remote_memory.data(), 1 << 20);
  ASSERT_TRUE(r);
  ASSERT_FALSE(initiator->write(*r, 0, local(0, 4096))); // described and cached
  ASSERT_FALSE(owner->unregister_region(*r));
  // The NIC refuses the stale key; the initiator forgets it, asks again and is told.
  auto err = initiator->write(*r, 0, local(0, 4096));
  EXPECT_TRUE(is(err, errc::not_found)) << describe(err);
  EXPECT_FALSE(initiator->read(region, 0, local(0, 4096))) << "other regions still work";
}

TEST_F(rdma_engines, a_deadline_ends_rdma_work_in_flight_and_the_path_recovers) {
  std::vector<transfer_op> ops;
  for (int i = 0; i < 64; ++i)
    ops.push_back({op_kind::read, local(uint64_t(i) << 20, 1u << 20), region, uint64_t(i) << 20});
  const auto start = clock_type::now();
  auto id = initiator->submit(ops, start + 2ms);
  ASSERT_TRUE(id);
  auto results = initiator->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_LT(clock_type::now() - start, 2s) << "expired work must end promptly";
  for (auto& r : *results)
    EXPECT_TRUE(r.state == op_state::completed || r.state == op_state::timed_out)
        << to_string(r.state) << ": " << describe(r.reason);
  // Reset queue pairs are replaced: the next operation takes RDMA again.
  const uint64_t before = bytes_on("rdma");
  ASSERT_FALSE(initiator->read(region, 0, local(0, 1 << 20)));
  EXPECT_GT(bytes_on("rdma"), before);
}

uint64_t rdma_retries(const transfer_engine& e) {
  uint64_t n = 0;
  for (const auto& m : e.metrics())
    if (m.backend == "rdma")
      n += m.retries;
  return n;
}

// A deadline ends its own batch's work only: queue pairs that other batches' work shares are
// not reset for it, so that work neither fails nor is retried.
TEST_F(rdma_engines, a_deadline_leaves_other_batches_on_the_same_queue_pairs_alone) {
  std::vector<transfer_op> steady;
  for (int i = 0; i < 32; ++i)
    steady.push_back(
        {op_kind::read, local(uint64_t(i) << 20, 1u << 20), region, uint64_t(i) << 20});
  std::vector<transfer_op> hurried;
  for (int i = 32; i < 64; ++i)
    hurried.push_back(
        {op_kind::read, local(uint64_t(i) << 20, 1u << 20), region, uint64_t(i) << 20});
  const uint64_t retries_before = rdma_retries(*initiator);
  for (int round = 0; round < 5; ++round) {
    auto a = initiator->submit(steady, clock_type::now() + 30s);
    auto b = initiator->submit(hurried, clock_type::now() + 1ms);
    ASSERT_TRUE(a && b);
    auto hurried_results = initiator->wait(*b);
    auto steady_results = initiator->wait(*a);
    ASSERT_TRUE(hurried_results && steady_results);
    for (auto& r : *steady_results)
      ASSERT_EQ(r.state, op_state::completed) << describe(r.reason);
    for (auto& r : *hurried_results)
      EXPECT_TRUE(r.state == op_state::completed || r.state == op_state::timed_out)
          << describe(r.reason);
  }
  EXPECT_EQ(rdma_retries(*initiator), retries_before) << "nothing was flushed and retried";
  EXPECT_EQ(bytes_on("tcp"), 0u);
}

// Each stale key breaks a queue pair, which is replaced; the owner is told to release its end
// each time, so that a long-lived control connection never runs out of its share (1024).
TEST_F(rdma_engines, replaced_queue_pairs_are_released_at_the_owner) {
  for (int i = 0; i < 1100; ++i) {
    auto r = owner->register_region(1, remote_memory.data(), 1 << 20);
    ASSERT_TRUE(r);
    ASSERT_FALSE(initiator->write(*r, 0, local(0, 4096))) << "round " << i; // described, cached
    ASSERT_FALSE(owner->unregister_region(*r));
    // The NIC refuses the stale key, which breaks the queue pair that carried it.
    EXPECT_TRUE(is(initiator->write(*r, 0, local(0, 4096)), errc::not_found));
  }
  const uint64_t before = bytes_on("rdma");
  ASSERT_FALSE(initiator->read(region, 0, local(0, 1 << 20)));
  EXPECT_GT(bytes_on("rdma"), before) << "the owner still accepts our queue pairs";
  EXPECT_EQ(bytes_on("tcp"), 0u);
}

// Re-adding the same peer keeps its queue pairs; replacing it with info RDMA cannot reach
// removes its RDMA route entirely (rdma_backend.cpp, add_peer), and TCP carries on.
TEST_F(rdma_engines, re_adding_a_peer_is_transactional) {
  ASSERT_FALSE(initiator->read(region, 0, local(0, 4096)));
  const uint64_t retries = rdma_retries(*initiator);
  ASSERT_FALSE(initiator->add_peer(owner->self_info()));
  ASSERT_FALSE(initiator->read(region, 0, local(0, 4096)));
  EXPECT_EQ(rdma_retries(*initiator), retries) << "the same peer again keeps its queue pairs";
  auto unreachable = owner->self_info();
  for (auto& p : unreachable.rdma_ports)
    p.link_layer = p.link_layer == 1 ? 2 : 1; // another link layer: no device pair reaches it
  ASSERT_FALSE(initiator->add_peer(unreachable));
  EXPECT_EQ(initiator->paths(1), (std::vector<std::string>{"tcp"}));
  const uint64_t rdma_before = bytes_on("rdma");
  ASSERT_FALSE(initiator->read(region, 0, local(0, 4096)));
  EXPECT_EQ(bytes_on("rdma"), rdma_before);
  EXPECT_EQ(bytes_on("tcp"), 4096u);
  ASSERT_FALSE(initiator->add_peer(owner->self_info())); // and back
  ASSERT_FALSE(initiator->read(region, 0, local(0, 4096)));
  EXPECT_GT(bytes_on("rdma"), rdma_before);
}

TEST_F(rdma_engines, a_vanished_peer_fails_operations_with_a_reason_before_the_deadline) {
  std::vector<transfer_op> ops;
  for (int i = 0; i < 64; ++i)
    ops.push_back({op_kind::read, local(uint64_t(i) << 20, 1u << 20), region, uint64_t(i) << 20});
  const auto deadline = clock_type::now() + 20s;
  auto id = initiator->submit(ops, deadline);
  ASSERT_TRUE(id);
  owner.reset(); // its queue pairs, keys and server go, mid-batch
  auto results = initiator->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_LT(clock_type::now(), deadline);
  for (auto& r : *results) {
    EXPECT_NE(r.state, op_state::pending);
    if (r.state == op_state::failed) {
      EXPECT_NE(describe(r.reason).find("node 1"), std::string::npos) << describe(r.reason);
    }
  }
  EXPECT_TRUE(initiator->read(region, 0, local(0, 8)));
}

TEST_F(rdma_engines, a_local_region_unregisters_and_its_buffers_then_take_tcp) {
  ASSERT_FALSE(initiator->write(region, 0, local(0, 65536)));
  EXPECT_EQ(bytes_on("tcp"), 0u);
  ASSERT_FALSE(initiator->unregister_region(local_region));
  ASSERT_FALSE(initiator->write(region, 0, local(0, 65536)));
  EXPECT_EQ(bytes_on("tcp"), 65536u);
}

TEST_F(rdma_engines, both_engines_advertise_their_ports) {
  const auto info = owner->self_info();
  ASSERT_FALSE(info.rdma_ports.empty());
  for (const auto& p : info.rdma_ports) {
    EXPECT_FALSE(p.device.empty());
    EXPECT_GE(p.port, 1);
    EXPECT_TRUE(p.link_layer == 1 || p.link_layer == 2);
    if (p.link_layer == 1) {
      EXPECT_NE(p.lid, 0);
    }
  }
}

} // namespace
} // namespace crescent::transport
