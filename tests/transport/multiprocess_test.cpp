// Two real processes on loopback: a `crescent transfer-peer` registers a region; this process
// learns how to reach it and the region's handle through actor messages (CAF's network layer),
// then reads and writes it through its own transfer engine, over TCP and over shared memory.
#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/peer_client.hpp"
#include "messages/errors.hpp"
#include "support/random_bytes.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <random>

namespace crescent::transport {
namespace {

enum class path { tcp, shm };

class peer_process : public ::testing::TestWithParam<path> {
 protected:
  void SetUp() override {
    bench::transfer_peer_options opt;
    opt.region_mib = 80;
    auto p = bench::start_transfer_peer(sys, CRESCENT_BINARY, opt);
    ASSERT_TRUE(p) << describe(p.error());
    peer.emplace(std::move(*p));
    transfer_options o;
    o.local_nodes = {2};
    o.enable_shm = GetParam() == path::shm;
    o.enable_tcp = GetParam() == path::tcp;
    o.enable_rdma = false;
    o.tcp_slice_bytes = 64u << 10;
    o.copy_slice_bytes = 64u << 10;
    auto e = transfer_engine::create(o);
    ASSERT_TRUE(e) << describe(e.error());
    engine = *e;
    auto err = engine->add_peer(peer->info);
    ASSERT_FALSE(err) << describe(err);
  }

  uint64_t remote_xxh3(uint64_t offset, uint64_t length) {
    auto d = bench::remote_digest(sys, peer->actor, offset, length);
    EXPECT_TRUE(d) << describe(d.error());
    return d ? *d : 0;
  }

  process_actor_system actors{true}; // its end is bounded, as a process's
  caf::actor_system& sys = actors.get();
  std::optional<bench::remote_peer> peer;
  std::shared_ptr<transfer_engine> engine;
};

using crescent::testing::random_bytes;

TEST_P(peer_process, reads_and_writes_through_handles_received_in_actor_messages) {
  const auto& region = peer->region;
  EXPECT_EQ(region.node, 1u);
  EXPECT_EQ(region.length, 80ull << 20);
  const uint64_t sizes[] = {1, 4097, 65536 + 13, (3u << 20) + 7, 64u << 20};
  uint64_t at = 5;
  for (auto size : sizes) {
    auto src = random_bytes(size, size);
    auto err = engine->write(region, at, src);
    ASSERT_FALSE(err) << describe(err);
    // The bytes are in the other process: it says so itself.
    EXPECT_EQ(remote_xxh3(at, size), XXH3_64bits(src.data(), size)) << size << " bytes";
    std::vector<std::byte> back(size);
    err = engine->read(region, at, back);
    ASSERT_FALSE(err) << describe(err);
    EXPECT_EQ(back, src);
    at = (at + size + 4093) % ((16u << 20));
  }
  auto forged = region;
  forged.access_key ^= 1;
  std::vector<std::byte> one(8);
  EXPECT_TRUE(is(engine->read(forged, 0, one), errc::access_denied));
  for (const auto& m : engine->metrics())
    EXPECT_EQ(m.backend, GetParam() == path::tcp ? "tcp" : "shm");
}

TEST_P(peer_process, a_killed_peer_fails_every_pending_operation_before_the_deadline) {
  if (GetParam() == path::shm)
    GTEST_SKIP() << "shared memory outlives its owner: copies into it still succeed";
  std::vector<std::vector<std::byte>> bufs;
  std::vector<transfer_op> ops;
  for (int i = 0; i < 256; ++i) {
    bufs.emplace_back(1u << 20);
    ops.push_back({op_kind::read, bufs.back(), peer->region, (uint64_t(i) % 64) << 20});
  }
  const auto deadline = clock_type::now() + std::chrono::seconds(20);
  auto id = engine->submit(ops, deadline);
  ASSERT_TRUE(id);
  peer->process.kill(); // SIGKILL, mid-batch
  auto results = engine->wait(*id);
  ASSERT_TRUE(results);
  EXPECT_LT(clock_type::now(), deadline);
  size_t failed = 0;
  for (auto& r : *results) {
    ASSERT_NE(r.state, op_state::pending);
    if (r.state != op_state::completed) {
      ++failed;
      EXPECT_EQ(r.state, op_state::failed);
      EXPECT_FALSE(describe(r.reason).empty());
    }
  }
  EXPECT_GT(failed, 0u) << "256 MiB cannot all have moved before the kill";
}

INSTANTIATE_TEST_SUITE_P(paths, peer_process, ::testing::Values(path::tcp, path::shm),
                         [](const auto& p) { return p.param == path::tcp ? "tcp" : "shm"; });

} // namespace
} // namespace crescent::transport
