// Two engines, each with its own region table, server and nodes, talking over the TCP and the
// shared-memory paths as two processes on one host would: random-data integrity from 1 byte to
// 64 MiB at unaligned offsets, batches, concurrent batches, refusals, a peer that goes away, and
// injected slice faults.
#include "messages/errors.hpp"
#include "messages/xxh3.hpp"
#include "support/integrity_cases.hpp"
#include "support/random_bytes.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>
#include <thread>

namespace crescent::transport {
namespace {

enum class path { tcp, shm };

std::string name_of(const ::testing::TestParamInfo<path>& p) {
  return p.param == path::tcp ? "tcp" : "shm";
}

constexpr uint64_t region_bytes = test::integrity_region_bytes;

using crescent::testing::random_bytes;

class two_engines : public ::testing::TestWithParam<path> {
 protected:
  void SetUp() override {
    transfer_options o;
    o.local_nodes = {1};
    auto made = transfer_engine::create(o);
    ASSERT_TRUE(made) << describe(made.error());
    owner = *made;
    transfer_options i;
    i.local_nodes = {2};
    i.enable_shm = GetParam() == path::shm;
    i.enable_tcp = GetParam() == path::tcp;
    i.enable_rdma = false; // rdma_backend_test.cpp covers it
    // Small slices: many per operation, so slicing and reassembly are what gets tested.
    i.tcp_slice_bytes = 64u << 10;
    i.copy_slice_bytes = 64u << 10;
    i.tcp_connections_per_peer = 3; // several, whatever the cores: slices spread over them
    made = transfer_engine::create(i);
    ASSERT_TRUE(made) << describe(made.error());
    initiator = *made;
    auto info = owner->self_info();
    ASSERT_FALSE(initiator->add_peer(info));
    memory = std::move(*host_memory::allocate(region_bytes));
    region = *owner->register_region(1, memory.data(), memory.size_bytes());
  }

  // One operation, alone in its batch, to its end.
  op_result run_one(const transfer_op& op) {
    const std::vector<transfer_op> ops{op};
    auto id = initiator->submit(ops, clock_type::now() + std::chrono::seconds(30));
    EXPECT_TRUE(id);
    auto results = id ? initiator->wait(*id) : caf::expected<std::vector<op_result>>{id.error()};
    EXPECT_TRUE(results);
    return results ? results->at(0) : op_result{};
  }

  // The path every byte took must be the one under test.
  void expect_path_used() {
    const char* want = GetParam() == path::tcp ? "tcp" : "shm";
    uint64_t bytes = 0;
    for (const auto& m : initiator->metrics()) {
      EXPECT_EQ(m.backend, want);
      bytes += m.bytes_read + m.bytes_written;
    }
    EXPECT_GT(bytes, 0u);
  }

  std::shared_ptr<transfer_engine> owner;
  std::shared_ptr<transfer_engine> initiator;
  host_memory memory;
  region_handle region;
};

TEST_P(two_engines, random_data_integrity_from_one_byte_to_64_mib) {
  uint64_t seed = 1;
  for (auto size : test::integrity_sizes) {
    for (auto offset : test::integrity_offsets) {
      if (offset + size > region_bytes)
        continue;
      SCOPED_TRACE(std::to_string(size) + " bytes at " + std::to_string(offset));
      auto src = random_bytes(size, seed++);
      auto err = initiator->write(region, offset, src);
      ASSERT_FALSE(err) << describe(err);
      ASSERT_EQ(0, std::memcmp(memory.data() + offset, src.data(), size));
      std::vector<std::byte> back(size);
      err = initiator->read(region, offset, back);
      ASSERT_FALSE(err) << describe(err);
      ASSERT_EQ(back, src);
    }
  }
  expect_path_used();
}

TEST_P(two_engines, batched_operations_with_checksums) {
  std::mt19937_64 rng{7};
  std::vector<std::vector<std::byte>> bufs;
  std::vector<transfer_op> writes;
  uint64_t at = 5;
  for (int i = 0; i < 40; ++i) {
    const uint64_t n = 1 + rng() % (300u << 10);
    bufs.push_back(random_bytes(n, rng()));
    writes.push_back({op_kind::write, bufs.back(), region, at, i % 2 == 0});
    at += n + rng() % 1000;
  }
  auto id = initiator->submit(writes, clock_type::now() + std::chrono::seconds(30));
  ASSERT_TRUE(id);
  auto results = initiator->wait(*id);
  ASSERT_TRUE(results);
  for (auto& r : *results)
    ASSERT_EQ(r.state, op_state::completed) << describe(r.reason);
  std::vector<std::vector<std::byte>> backs;
  std::vector<transfer_op> reads;
  for (auto& w : writes) {
    backs.emplace_back(w.local.size());
    reads.push_back({op_kind::read, backs.back(), region, w.remote_offset, true});
  }
  id = initiator->submit(reads, clock_type::now() + std::chrono::seconds(30));
  results = initiator->wait(*id);
  ASSERT_TRUE(results);
  for (size_t i = 0; i < reads.size(); ++i) {
    ASSERT_EQ((*results)[i].state, op_state::completed) << describe((*results)[i].reason);
    ASSERT_EQ(backs[i], bufs[i]) << "op " << i;
  }
}

TEST_P(two_engines, concurrent_batches_from_several_threads) {
  constexpr int threads = 4;
  constexpr uint64_t share = region_bytes / threads;
  std::vector<std::thread> workers;
  std::atomic<int> failures{0};
  for (int t = 0; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int round = 0; round < 4; ++round) {
        auto src = random_bytes((1u << 20) + t * 977 + round, t * 100 + round);
        std::vector<std::byte> back(src.size());
        const uint64_t at = t * share + round * 13;
        std::vector<transfer_op> w{{op_kind::write, src, region, at}};
        auto id = initiator->submit(w, clock_type::now() + std::chrono::seconds(30));
        auto r = initiator->wait(*id);
        std::vector<transfer_op> rd{{op_kind::read, back, region, at}};
        id = initiator->submit(rd, clock_type::now() + std::chrono::seconds(30));
        auto r2 = initiator->wait(*id);
        if (!r || !r2 || (*r)[0].state != op_state::completed ||
            (*r2)[0].state != op_state::completed || back != src)
          ++failures;
      }
    });
  for (auto& w : workers)
    w.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST_P(two_engines, refusals_are_explicit_and_write_nothing) {
  std::memset(memory.data(), 0, 1 << 20);
  auto src = random_bytes(100, 3);
  auto forged = region;
  forged.access_key ^= 0xff;
  auto err = initiator->write(forged, 0, src);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  auto grown = region.slice(0, 64);
  grown.offset = region_bytes - 32; // a handle reaching past the end of its region
  err = initiator->write(grown, 0, src.data() ? std::span{src}.first(64) : std::span<std::byte>{});
  EXPECT_TRUE(is(err, errc::out_of_range)) << describe(err);
  auto stale = owner->register_region(1, memory.data(), 1 << 20);
  ASSERT_TRUE(stale);
  ASSERT_FALSE(owner->unregister_region(*stale));
  err = initiator->write(*stale, 0, src);
  EXPECT_TRUE(is(err, errc::not_found)) << describe(err);
  EXPECT_TRUE(std::all_of(memory.data(), memory.data() + (1 << 20),
                          [](std::byte b) { return b == std::byte{0}; }));
}

TEST_P(two_engines, a_vanished_peer_fails_operations_with_a_reason_before_the_deadline) {
  if (GetParam() == path::shm)
    GTEST_SKIP() << "shared memory outlives its owner: copies into it still succeed";
  std::vector<std::vector<std::byte>> bufs;
  std::vector<transfer_op> ops;
  for (int i = 0; i < 64; ++i) {
    bufs.emplace_back(1u << 20);
    ops.push_back({op_kind::read, bufs.back(), region, uint64_t(i) << 20});
  }
  const auto deadline = clock_type::now() + std::chrono::seconds(20);
  auto id = initiator->submit(ops, deadline);
  ASSERT_TRUE(id);
  owner.reset(); // its server closes every connection, mid-batch
  auto results = initiator->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_LT(clock_type::now(), deadline);
  size_t failed = 0;
  for (auto& r : *results) {
    EXPECT_NE(r.state, op_state::pending);
    if (r.state == op_state::failed) {
      ++failed;
      EXPECT_NE(describe(r.reason).find("node 1"), std::string::npos) << describe(r.reason);
    }
  }
  // The owner may have served some reads before it went; after it, nothing can succeed.
  std::vector<std::byte> one(8);
  EXPECT_TRUE(initiator->read(region, 0, one));
}

TEST_P(two_engines, injected_slice_faults_fail_or_change_bytes_as_on_the_in_process_path) {
  // What crescent chaos injects (apps/sim/fault_injector.hpp), on the paths between processes.
  auto data = random_bytes(200u << 10, 9);
  const auto zeros = std::vector<std::byte>(data.size());
  auto remote = [&] { return std::vector<std::byte>(memory.data(), memory.data() + data.size()); };
  std::memset(memory.data(), 0, data.size());

  initiator->set_fault_hook([](const slice_view&) { return slice_fault::fail; });
  auto r = run_one(transfer_op{op_kind::write, data, region, 0, true});
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_TRUE(is(r.reason, errc::io_error)) << describe(r.reason);
  EXPECT_NE(describe(r.reason).find("injected fault"), std::string::npos) << describe(r.reason);
  EXPECT_EQ(remote(), zeros) << "a failed slice writes nothing";

  initiator->set_fault_hook([](const slice_view&) { return slice_fault::corrupt; });
  r = run_one(transfer_op{op_kind::write, data, region, 0, true});
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_TRUE(is(r.reason, errc::checksum_mismatch)) << describe(r.reason);
  const auto sent = data;
  r = run_one(transfer_op{op_kind::write, data, region, 0, false});
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  auto landed = remote();
  EXPECT_NE(landed, data) << "without a checksum the change goes unseen";
  EXPECT_EQ(data, sent) << "the source does not change";
  size_t changed = 0;
  for (size_t i = 0; i < landed.size(); ++i)
    changed += landed[i] != data[i] ? 1 : 0;
  // One window of 8 bytes in each 64 KiB slice (this fixture's), each byte flipped.
  EXPECT_EQ(changed, 8u * ((data.size() + (64u << 10) - 1) / (64u << 10)));

  initiator->set_fault_hook({});
  ASSERT_EQ(run_one(transfer_op{op_kind::write, data, region, 0, true}).state, op_state::completed);
  initiator->set_fault_hook([](const slice_view&) { return slice_fault::corrupt; });
  std::vector<std::byte> back(data.size());
  r = run_one(transfer_op{op_kind::read, back, region, 0, true});
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_TRUE(is(r.reason, errc::checksum_mismatch)) << describe(r.reason);
  r = run_one(transfer_op{op_kind::read, back, region, 0, false});
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_NE(back, data) << "a read's bytes change on arrival";
  EXPECT_EQ(remote(), data) << "the source does not";

  initiator->set_fault_hook({});
  r = run_one(transfer_op{op_kind::read, back, region, 0, true});
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_EQ(back, data);
  expect_path_used();
}

// A checked write that states its bytes' checksum lands only if what lands hashes to it: the
// caller's hash, not one taken as the bytes leave, is what the receiving side checks (in one
// slice; this fixture's slices are 64 KiB).
TEST_P(two_engines, a_checked_write_lands_only_with_the_checksum_its_caller_gave) {
  auto data = random_bytes(48u << 10, 11);
  std::memset(memory.data(), 0, data.size());
  transfer_op op{op_kind::write, data, region, 0, true};

  op.local_checksum = xxh3_64(std::span<const std::byte>{data}) ^ 1; // not these bytes'
  auto r = run_one(op);
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_TRUE(is(r.reason, errc::checksum_mismatch)) << describe(r.reason);

  op.local_checksum = xxh3_64(std::span<const std::byte>{data});
  r = run_one(op);
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_EQ(0, std::memcmp(memory.data(), data.data(), data.size()));

  // Injected damage on the way is still caught with the caller's checksum.
  initiator->set_fault_hook([](const slice_view&) { return slice_fault::corrupt; });
  r = run_one(op);
  initiator->set_fault_hook({});
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_TRUE(is(r.reason, errc::checksum_mismatch)) << describe(r.reason);

  // Over several slices the checksum given is not the slices', and each is hashed as it leaves.
  auto longer = random_bytes(200u << 10, 12);
  transfer_op many{op_kind::write, longer, region, 0, true};
  many.local_checksum = 0;
  r = run_one(many);
  EXPECT_EQ(r.state, op_state::completed) << describe(r.reason);
  EXPECT_EQ(0, std::memcmp(memory.data(), longer.data(), longer.size()));
}

TEST_P(two_engines, injected_delays_hold_slices_until_their_time_deadline_or_cancel) {
  auto delay_all = [&](std::chrono::milliseconds d) {
    initiator->set_fault_hook([d](const slice_view&) {
      return slice_verdict{slice_fault::delay, d};
    });
  };
  auto data = random_bytes(200u << 10, 11);
  const std::vector<transfer_op> ops{{op_kind::write, data, region, 0, true}};

  // Held 30 ms, then moved intact: the batch cannot end sooner.
  delay_all(std::chrono::milliseconds(30));
  const auto start = clock_type::now();
  auto id = initiator->submit(ops, clock_type::now() + std::chrono::seconds(30));
  ASSERT_TRUE(id);
  auto results = initiator->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_GE(clock_type::now() - start, std::chrono::milliseconds(30));
  EXPECT_EQ(results->at(0).state, op_state::completed) << describe(results->at(0).reason);
  EXPECT_EQ(results->at(0).modeled_ns, 0u) << "a held delay is real time, not modeled";
  EXPECT_EQ(std::vector<std::byte>(memory.data(), memory.data() + data.size()), data);

  // Held an hour: the deadline ends it, and cancel() does, without waiting for the hour.
  delay_all(std::chrono::hours(1));
  id = initiator->submit(ops, clock_type::now() + std::chrono::milliseconds(50));
  results = initiator->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ(results->at(0).state, op_state::timed_out) << describe(results->at(0).reason);
  id = initiator->submit(ops, clock_type::now() + std::chrono::seconds(30));
  initiator->cancel(*id);
  results = initiator->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_EQ(results->at(0).state, op_state::cancelled) << describe(results->at(0).reason);

  // An engine that stops ends what it holds: the callback still runs.
  std::optional<op_result> ended;
  ASSERT_FALSE(initiator->submit(ops, clock_type::now() + std::chrono::seconds(30),
                                 [&](std::vector<op_result> r) { ended = r.at(0); }));
  initiator.reset();
  ASSERT_TRUE(ended.has_value());
  EXPECT_EQ(ended->state, op_state::cancelled);
}

INSTANTIATE_TEST_SUITE_P(paths, two_engines, ::testing::Values(path::tcp, path::shm), name_of);

} // namespace
} // namespace crescent::transport
