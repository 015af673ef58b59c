// The KV pool across real processes: a `crescent pool-master` and three `crescent pool-node`
// processes on loopback, driven by a client in this process. Nodes and the master are killed
// with SIGKILL mid-work; nothing that was acknowledged may be lost or come back wrong.
#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/child_process.hpp"
#include "apps/pool/pool_client.hpp"
#include "apps/pool/pool_launch.hpp"
#include "messages/errors.hpp"
#include "storage/ssd_tier.hpp"
#include "support/block_keys.hpp"
#include "support/random_bytes.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <gtest/gtest.h>

#include <poll.h>

#include <filesystem>
#include <optional>
#include <random>
#include <set>

namespace crescent::testing {
namespace {

constexpr uint64_t block_bytes = 4096;
constexpr uint32_t node_count = 3;
constexpr uint32_t client_node = 9;

std::vector<std::byte> block_of(uint64_t key) {
  return random_bytes(block_bytes, key * 7919 + 1);
}

class pool_processes : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    start_master(0);
    for (uint32_t n = 0; n < node_count; ++n) {
      auto p = start_node(n);
      ASSERT_TRUE(p) << describe(p.error());
      nodes.emplace_back(std::move(*p));
    }
    connect();
  }

  // Node n's block owner: 64 MiB of DRAM, or 1 MiB of DRAM and 64 MiB of SSD with `ssd`.
  caf::expected<bench::child_process> start_node(uint32_t n) {
    std::vector<std::string> args{"--node", std::to_string(n), "--master-port",
                                  std::to_string(port)};
    if (ssd)
      args.insert(args.end(), {"--dram-mib", "1", "--ssd-mib", "64", "--ssd-dir",
                               dir + "/ssd" + std::to_string(n)});
    else
      args.insert(args.end(), {"--dram-mib", "64"});
    if (file_size_limit_bytes > 0)
      args.insert(args.end(), {"--file-size-limit", std::to_string(file_size_limit_bytes)});
    return pool::launch_node(CRESCENT_BINARY, args, std::chrono::seconds(30));
  }

  void TearDown() override {
    client.reset();
    nodes.clear();
    master.reset();
    std::filesystem::remove_all(dir);
  }

  void start_master(uint16_t at) {
    auto m = pool::launch_master(CRESCENT_BINARY,
                                 {"--nodes", std::to_string(node_count), "--db", dir + "/metadata",
                                  "--port", std::to_string(at), "--node-timeout-ms", "2000",
                                  "--lease-ttl-ms", ssd ? "200" : "5000"},
                                 std::chrono::seconds(30));
    ASSERT_TRUE(m) << describe(m.error());
    port = m->port;
    master.emplace(std::move(m->process));
  }

  void connect() {
    auto c = pool::pool_client::connect(sys, "127.0.0.1", port, client_node);
    ASSERT_TRUE(c) << describe(c.error());
    client = std::move(*c);
    auto err = client->await_owners(node_count, std::chrono::seconds(30));
    ASSERT_FALSE(err) << describe(err);
  }

  // Puts keys [first, first + count) in batches of 100; returns the acknowledged ones.
  std::vector<uint64_t> put_range(uint64_t first, uint64_t count, uint32_t replicas,
                                  std::function<void(uint64_t)> between = nullptr) {
    std::vector<uint64_t> acked;
    size_t failures = 0;
    for (uint64_t at = first; at < first + count; at += 100) {
      if (between)
        between(at - first);
      std::vector<uint64_t> keys;
      std::vector<std::vector<std::byte>> data;
      for (uint64_t k = at; k < std::min(first + count, at + 100); ++k) {
        keys.push_back(k);
        data.push_back(block_of(k));
      }
      std::vector<std::span<const std::byte>> spans(data.begin(), data.end());
      auto done = client->put(numbered_keys(keys), spans, replicas);
      if (done)
        for (const auto& key : *done)
          acked.push_back(key.lo);
      else if (failures++ == 0)
        ADD_FAILURE() << "a put failed as a whole: " << describe(done.error());
    }
    return acked;
  }

  // Reads every key; returns how many came back verified, and checks none came back wrong.
  size_t verify(const std::vector<uint64_t>& keys, size_t batch = 100,
                std::vector<uint64_t>* missed = nullptr) {
    size_t good = 0;
    for (size_t at = 0; at < keys.size(); at += batch) {
      const size_t n = std::min<size_t>(batch, keys.size() - at);
      std::vector<std::vector<std::byte>> bufs(n, std::vector<std::byte>(block_bytes));
      std::vector<std::span<std::byte>> spans(bufs.begin(), bufs.end());
      auto ok = client->get(numbered_keys(std::span{keys}.subspan(at, n)), spans);
      EXPECT_TRUE(ok) << describe(ok.error());
      if (!ok)
        continue;
      for (size_t i = 0; i < n; ++i)
        if ((*ok)[i]) {
          EXPECT_EQ(bufs[i], block_of(keys[at + i])) << "verified bytes must be the block's";
          ++good;
        } else if (missed != nullptr) {
          missed->push_back(keys[at + i]);
        }
    }
    return good;
  }

  process_actor_system actors{true}; // its end is bounded, as a process's
  caf::actor_system& sys = actors.get();
  std::string dir =
      (std::filesystem::temp_directory_path() / ("crescent-pool-" + std::to_string(::getpid())))
          .string();
  uint16_t port = 0;
  std::optional<bench::child_process> master;
  std::vector<bench::child_process> nodes;
  std::unique_ptr<pool::pool_client> client;
  bool ssd = false;
  uint64_t file_size_limit_bytes = 0; // of every node process; 0: none
};

class pool_processes_with_ssd : public pool_processes {
 protected:
  // Tiny DRAM tiers, so reads lease for only 200 ms: a leased block is not evicted, and
  // promotions need room.
  void SetUp() override {
    ssd = true;
    pool_processes::SetUp();
  }

  // Puts keys [first, first + count) with one replica, in batches of 50. A put that finds DRAM
  // full while the owner is still offloading is not acknowledged; it is put again.
  std::vector<uint64_t> put_patiently(uint64_t first, uint64_t count) {
    std::vector<uint64_t> acked;
    for (uint64_t at = first; at < first + count; at += 50) {
      std::vector<uint64_t> left;
      for (uint64_t k = at; k < std::min(first + count, at + 50); ++k)
        left.push_back(k);
      for (int attempt = 0; attempt < 100 && !left.empty(); ++attempt) {
        std::vector<std::vector<std::byte>> data;
        for (auto k : left)
          data.push_back(block_of(k));
        std::vector<std::span<const std::byte>> spans(data.begin(), data.end());
        auto done = client->put(numbered_keys(left), spans, 1);
        EXPECT_TRUE(done) << describe(done.error());
        if (!done)
          return acked;
        for (const auto& key : *done)
          acked.push_back(key.lo);
        std::erase_if(left, [&](uint64_t k) {
          return std::find(done->begin(), done->end(), block_key{0, k}) != done->end();
        });
      }
    }
    return acked;
  }

  // The master's counters once `ready` holds for them (owners report SSD errors with their
  // heartbeats, once a second); the last ones seen after 10 s.
  pool::pool_stats stats_once(std::function<bool(const pool::pool_stats&)> ready) {
    pool::pool_stats last;
    for (int i = 0; i < 500; ++i) {
      auto now = client->stats();
      EXPECT_TRUE(now) << describe(now.error());
      if (!now)
        break;
      last = *now;
      if (ready(last))
        break;
      poll(nullptr, 0, 20);
    }
    return last;
  }

  // Like verify(), in small batches, reading what missed again: a block only on SSD is promoted
  // into DRAM on a get, and while the owner's DRAM is full (it offloads in the background) the
  // promotion fails and the get is a miss.
  size_t verify_patiently(std::vector<uint64_t> keys, std::vector<uint64_t>* missing = nullptr) {
    size_t good = 0;
    for (int round = 0, stalled = 0; round < 60 && stalled < 3 && !keys.empty(); ++round) {
      std::vector<uint64_t> missed;
      const size_t found = verify(keys, 16, &missed);
      good += found;
      keys = std::move(missed);
      // Nothing came back: the blocks in DRAM are leased by these reads for 200 ms, and cannot
      // make room for promotions until the leases end.
      stalled = found == 0 ? stalled + 1 : 0;
      if (found == 0)
        poll(nullptr, 0, 250);
    }
    if (missing != nullptr)
      *missing = keys;
    return good;
  }
};

TEST_F(pool_processes, a_killed_owner_loses_no_acknowledged_block_with_two_replicas) {
  auto acked = put_range(0, 10000, 2, [&](uint64_t done) {
    if (done == 3000)
      nodes[1].kill(); // SIGKILL, mid-run
  });
  EXPECT_GT(acked.size(), 9000u) << "puts go on once the master notices the loss";
  EXPECT_EQ(verify(acked), acked.size()) << "zero acknowledged blocks lost or corrupted";
}

TEST_F(pool_processes, with_one_replica_a_killed_owner_means_explicit_misses) {
  auto acked = put_range(0, 3000, 1);
  ASSERT_EQ(acked.size(), 3000u);
  EXPECT_EQ(verify(acked), 3000u);
  nodes[2].kill();
  // Until the master notices, node 2's replicas may still be read: its memory stays mapped here.
  auto err = client->await_live_nodes(node_count - 1, std::chrono::seconds(30));
  ASSERT_FALSE(err) << describe(err);
  const size_t good = verify(acked);
  EXPECT_LT(good, acked.size()) << "the dead node's blocks are gone";
  EXPECT_GT(good, acked.size() / 3) << "the others' are not";
}

TEST_F(pool_processes, clients_sharing_one_engine_remove_and_put_what_the_other_reads) {
  ASSERT_EQ(put_range(0, 200, 1).size(), 200u);
  // A second client through the first one's engine: no await_owners, the routes are there.
  auto second = pool::pool_client::connect(sys, "127.0.0.1", port, client_node + 1, nullptr,
                                           client->shared_engine());
  ASSERT_TRUE(second) << describe(second.error());
  std::vector<uint64_t> removed;
  for (uint64_t k = 0; k < 100; ++k)
    removed.push_back(k);
  auto err = (*second)->remove(numbered_keys(removed));
  ASSERT_FALSE(err) << describe(err);
  auto stats = client->stats();
  ASSERT_TRUE(stats) << describe(stats.error());
  EXPECT_EQ(stats->complete_blocks, 100u);
  std::vector<uint64_t> missed;
  std::vector<uint64_t> all;
  for (uint64_t k = 0; k < 200; ++k)
    all.push_back(k);
  EXPECT_EQ(verify(all, 100, &missed), 100u);
  EXPECT_EQ(missed, removed) << "exactly the removed blocks miss";
  // What the second client writes, the first reads.
  std::vector<std::vector<std::byte>> data;
  for (uint64_t k = 1000; k < 1050; ++k)
    data.push_back(block_of(k));
  std::vector<uint64_t> fresh;
  for (uint64_t k = 1000; k < 1050; ++k)
    fresh.push_back(k);
  std::vector<std::span<const std::byte>> spans(data.begin(), data.end());
  auto done = (*second)->put(numbered_keys(fresh), spans, 1);
  ASSERT_TRUE(done) << describe(done.error());
  EXPECT_EQ(done->size(), 50u);
  EXPECT_EQ(verify(fresh), 50u);
  std::vector<block_key> none;
  EXPECT_TRUE((*second)->remove(none)) << "a remove of no keys is refused";
}

TEST_F(pool_processes, the_longest_available_prefix_is_read_and_verified) {
  // A chain of ten blocks whose sixth was never stored.
  ASSERT_EQ(put_range(500, 5, 1).size(), 5u);
  ASSERT_EQ(put_range(506, 4, 1).size(), 4u);
  std::vector<uint64_t> chain;
  for (uint64_t k = 500; k < 510; ++k)
    chain.push_back(k);
  std::vector<std::vector<std::byte>> bufs(chain.size(), std::vector<std::byte>(block_bytes));
  std::vector<std::span<std::byte>> spans(bufs.begin(), bufs.end());
  auto n = client->get_prefix(numbered_keys(chain), spans);
  ASSERT_TRUE(n) << describe(n.error());
  EXPECT_EQ(*n, 5u);
  for (size_t i = 0; i < *n; ++i)
    EXPECT_EQ(bufs[i], block_of(chain[i]));
  auto rest =
      client->get_prefix(numbered_keys(std::span{chain}.subspan(6)), std::span{spans}.subspan(6));
  ASSERT_TRUE(rest) << describe(rest.error());
  EXPECT_EQ(*rest, 4u);
  EXPECT_EQ(bufs[9], block_of(509));
  auto none = client->get_prefix(numbered_keys(std::span{chain}.subspan(5, 1)),
                                 std::span{spans}.subspan(5, 1));
  ASSERT_TRUE(none) << describe(none.error());
  EXPECT_EQ(*none, 0u);
}

TEST_F(pool_processes, a_restarted_master_finds_every_committed_block) {
  auto acked = put_range(0, 2000, 2);
  ASSERT_EQ(acked.size(), 2000u);
  const uint16_t old_port = port;
  client.reset();
  master->kill();
  master.reset();
  start_master(old_port); // same metadata, same port: the owners rejoin by themselves
  ASSERT_EQ(port, old_port);
  connect();
  EXPECT_EQ(verify(acked), acked.size());
}

TEST_F(pool_processes_with_ssd, ssd_blocks_survive_an_owner_restart) {
  // About 500 blocks per node, 2 MiB, in 1 MiB of DRAM: more than half are offloaded to SSD.
  auto acked = put_patiently(0, 1500);
  ASSERT_EQ(acked.size(), 1500u);
  ASSERT_EQ(verify_patiently(acked), acked.size()) << "SSD-only blocks are promoted on a get";
  nodes[0].kill();
  auto err = client->await_live_nodes(node_count - 1, std::chrono::seconds(30));
  ASSERT_FALSE(err) << describe(err);
  const size_t while_down = verify_patiently(acked);
  EXPECT_LT(while_down + 300, acked.size()) << "node 0's blocks are not served while it is down";
  auto again = start_node(0); // the same SSD files
  ASSERT_TRUE(again) << describe(again.error());
  nodes[0] = std::move(*again);
  err = client->await_live_nodes(node_count, std::chrono::seconds(30));
  ASSERT_FALSE(err) << describe(err);
  err = client->await_owners(node_count, std::chrono::seconds(30)); // node 0's new memory
  ASSERT_FALSE(err) << describe(err);
  const size_t after = verify_patiently(acked);
  // What was only in node 0's DRAM (1 MiB: 256 blocks at most) died with it; its SSD kept the
  // rest, byte for byte (verify() checks every byte it counts).
  EXPECT_GE(after + 256, acked.size());
  EXPECT_GT(after, while_down + 200) << "node 0's SSD blocks came back";
}

// Nodes whose files cannot grow past 2 MiB (RLIMIT_FSIZE): each SSD tier takes 512 blocks, then
// every write fails with EFBIG, which the tier reports as a full disk (no_space).
class pool_processes_with_full_disks : public pool_processes_with_ssd {
 protected:
  static constexpr uint64_t ssd_blocks_max = (2u << 20) / block_bytes;

  void SetUp() override {
    file_size_limit_bytes = 2u << 20;
    pool_processes_with_ssd::SetUp();
  }
};

TEST_F(pool_processes_with_full_disks, ssd_failures_are_counted_misses_never_wrong_bytes) {
  // 1000 blocks per node: about 230 stay in DRAM and up to 512 fit on SSD; offloading the rest
  // fails.
  auto acked = put_patiently(0, 3000);
  ASSERT_EQ(acked.size(), 3000u) << "a full SSD does not stop puts: eviction makes room";
  auto s = stats_once([](const auto& x) { return x.ssd_write_errors > 0; });
  EXPECT_GT(s.ssd_write_errors, 0u) << "failed offloads show in the master's statistics";
  // Victims that could not be offloaded were evicted: misses, never wrong bytes (verify()
  // compares every block it counts).
  std::vector<uint64_t> missing;
  const size_t before = verify_patiently(acked, &missing);
  EXPECT_GT(missing.size(), 0u);
  EXPECT_GT(before, node_count * 256) << "more than DRAM holds: the SSD blocks are served";

  // An I/O error under a running owner: node 0's data file loses its contents.
  std::filesystem::resize_file(dir + "/ssd0/blocks.data", 0);
  const size_t after = verify_patiently(acked);
  EXPECT_LT(after, before) << "node 0's SSD-only blocks cannot be read any more";
  s = stats_once([](const auto& x) { return x.ssd_read_errors > 0; });
  EXPECT_GT(s.ssd_read_errors, 0u);
  // verify_patiently() reads a missing block again and again: an unreadable SSD copy fails
  // once (the owner forgets it), and its replica leaves the metadata: each failure is a lost
  // block at the master, not a replica still offered.
  EXPECT_LE(s.ssd_read_errors, ssd_blocks_max);
  EXPECT_GE(s.lost_blocks, s.ssd_read_errors);

  // Whatever is on nodes 1 and 2's SSDs was served: no block reached an SSD and then went
  // unread, and no copy stayed behind after its block was evicted.
  const std::set<uint64_t> missed(missing.begin(), missing.end());
  for (uint32_t n = 1; n < node_count; ++n) {
    nodes[n].kill(); // its SSD index is locked while it runs
    storage::ssd_options o;
    o.directory = dir + "/ssd" + std::to_string(n);
    o.capacity_bytes = 64u << 20;
    o.blocks_max = static_cast<uint32_t>(o.capacity_bytes / block_bytes);
    auto tier = storage::ssd_tier::open(o);
    ASSERT_TRUE(tier) << describe(tier.error());
    // How many fit below the limit depends on where the allocator put them (256 or 512 here).
    EXPECT_GT((*tier)->blocks().size(), 0u);
    for (const auto& b : (*tier)->blocks())
      EXPECT_EQ(missed.count(b.key.lo), 0u)
          << "block " << b.key.lo << " is on node " << n << "'s SSD";
  }
}

} // namespace
} // namespace crescent::testing
