// The pool's client-side batches (actors/store_master/pool_batches.hpp) on hand-built gets and
// grants: which replica each round reads, what verifies, what is reported, what counts as
// written. The bytes "on the owners" are vectors here; every op of a round is carried out by
// copying them, as an engine would.
#include "actors/common/code_probe.hpp"
#include "actors/store_master/pool_batches.hpp"
#include "messages/errors.hpp"
#include "storage/checksum.hpp"
#include "support/block_keys.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <map>

namespace crescent {
namespace {

using pool_batches::block_read;
using pool_batches::read_extent;
using pool_batches::read_fit;
using pool_batches::replica_reads;
using transport::region_handle;

std::vector<std::byte> bytes_of(uint8_t fill, size_t n) {
  return std::vector<std::byte>(n, std::byte{fill});
}

// Replicas "on owners": region id -> its bytes; a region not here fails its read.
struct owners {
  std::map<uint64_t, std::vector<std::byte>> regions;
  uint64_t next_id = 1;

  region_handle put(uint32_t node, std::vector<std::byte> bytes) {
    const auto id = next_id++;
    region_handle h{node, id, 0, bytes.size(), 7};
    regions[id] = std::move(bytes);
    return h;
  }

  std::vector<caf::error> run(const std::vector<transport::transfer_op>& ops) {
    std::vector<caf::error> out;
    for (const auto& op : ops) {
      auto it = regions.find(op.remote.region_id);
      if (it == regions.end()) {
        out.push_back(make_error(errc::not_found, "no registered region"));
        continue;
      }
      EXPECT_EQ(op.kind, transport::op_kind::read);
      EXPECT_LE(op.local.size(), it->second.size());
      std::memcpy(op.local.data(), it->second.data(), op.local.size());
      out.emplace_back();
    }
    return out;
  }
};

block_read block(block_key key, const std::vector<std::byte>& good,
                 std::vector<region_handle> replicas) {
  block_read b;
  b.key = key;
  b.checksum = storage::block_checksum(good);
  b.replicas = std::move(replicas);
  return b;
}

struct three_blocks {
  owners pool;
  std::vector<std::vector<std::byte>> good{bytes_of(1, 64), bytes_of(2, 64), bytes_of(3, 64)};
  std::vector<std::vector<std::byte>> buffers{3, std::vector<std::byte>(64)};

  std::vector<std::span<std::byte>> out() { return {buffers[0], buffers[1], buffers[2]}; }
};

TEST(replica_reads, tries_each_blocks_next_replica_until_one_verifies_and_reports_bad_bytes) {
  three_blocks t;
  // Block 1: its first replica's bytes changed, its second good. Block 2: its first replica
  // gone, its second good. Block 1 verifies at once.
  const auto bad = t.pool.put(4, bytes_of(9, 64));
  const auto gone = region_handle{5, 999, 0, 64, 7};
  replica_reads reads{{block(1_key, t.good[0], {t.pool.put(4, t.good[0])}),
                       block(2_key, t.good[1], {bad, t.pool.put(6, t.good[1])}),
                       block(3_key, t.good[2], {gone, t.pool.put(6, t.good[2])})},
                      t.out(),
                      read_fit::exact,
                      read_extent::all};
  auto first = reads.next_round();
  ASSERT_EQ(first.blocks, (std::vector<size_t>{0, 1, 2}));
  reset_probes();
  auto corrupt = reads.settle(first.blocks, t.pool.run(first.ops));
  EXPECT_EQ(probe_hits("pool.read_corrupt_replica"), 1u) << "a rare path, marked";
  EXPECT_EQ(probe_hits("pool.read_failed_next_replica"), 1u);
  ASSERT_EQ(corrupt.size(), 1u);
  EXPECT_EQ(corrupt[0].key, 2_key);
  EXPECT_EQ(corrupt[0].node, 4u);
  EXPECT_EQ(reads.verified_prefix(), 1u);
  EXPECT_TRUE(is(reads.blocks()[1].last_error, errc::checksum_mismatch));
  EXPECT_TRUE(is(reads.blocks()[2].last_error, errc::not_found));

  auto second = reads.next_round();
  ASSERT_EQ(second.blocks, (std::vector<size_t>{1, 2}));
  EXPECT_EQ(second.ops[0].remote.node, 6u);
  EXPECT_TRUE(reads.settle(second.blocks, t.pool.run(second.ops)).empty());
  EXPECT_EQ(reads.verified_prefix(), 3u);
  EXPECT_TRUE(reads.next_round().ops.empty());
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ(t.buffers[i], t.good[i]) << i;
}

TEST(replica_reads, a_prefix_stops_at_its_first_block_with_no_replica_left_and_all_does_not) {
  for (auto extent : {read_extent::prefix, read_extent::all}) {
    three_blocks t;
    const auto gone = region_handle{5, 999, 0, 64, 7};
    replica_reads reads{{block(1_key, t.good[0], {t.pool.put(4, t.good[0])}),
                         block(2_key, t.good[1], {gone}),
                         block(3_key, t.good[2], {gone, t.pool.put(6, t.good[2])})},
                        t.out(),
                        read_fit::exact,
                        extent};
    auto first = reads.next_round();
    ASSERT_EQ(first.ops.size(), 3u);
    reads.settle(first.blocks, t.pool.run(first.ops));
    auto second = reads.next_round();
    if (extent == read_extent::prefix) {
      EXPECT_TRUE(second.ops.empty()) << "block 3 is of no use after block 2";
      EXPECT_EQ(reads.verified_prefix(), 1u);
    } else {
      ASSERT_EQ(second.blocks, (std::vector<size_t>{2}));
      reads.settle(second.blocks, t.pool.run(second.ops));
      EXPECT_TRUE(reads.blocks()[2].verified);
      EXPECT_FALSE(reads.blocks()[1].verified);
      EXPECT_TRUE(reads.next_round().ops.empty());
    }
  }
}

TEST(replica_reads, a_replica_of_another_size_is_skipped_unless_blocks_fill_the_buffers_front) {
  owners pool;
  const auto good = bytes_of(5, 40); // encoded: shorter than its 64-byte page
  for (auto fit : {read_fit::exact, read_fit::front}) {
    std::vector<std::byte> page(64);
    replica_reads reads{{block(1_key, good, {pool.put(2, good)})}, {page}, fit, read_extent::all};
    auto round = reads.next_round();
    if (fit == read_fit::exact) {
      EXPECT_TRUE(round.ops.empty());
      EXPECT_TRUE(is(reads.blocks()[0].last_error, errc::invalid_argument));
      continue;
    }
    ASSERT_EQ(round.ops.size(), 1u);
    EXPECT_EQ(round.ops[0].local.size(), 40u);
    reads.settle(round.blocks, pool.run(round.ops));
    EXPECT_TRUE(reads.blocks()[0].verified);
    EXPECT_TRUE(std::equal(good.begin(), good.end(), page.begin()));
  }
}

TEST(replica_reads, accept_refuses_a_block_whose_checksum_matches_and_the_next_replica_is_tried) {
  three_blocks t;
  std::vector<size_t> asked;
  replica_reads reads{
      {block(1_key, t.good[0], {t.pool.put(2, t.good[0]), t.pool.put(3, t.good[0])})},
      {t.buffers[0]},
      read_fit::exact,
      read_extent::all};
  auto refuse_first = [&](size_t i, size_t bytes) -> caf::error {
    asked.push_back(bytes);
    EXPECT_EQ(i, 0u);
    if (asked.size() == 1)
      return make_error(errc::malformed_message, "the codec does not know it");
    return {};
  };
  auto first = reads.next_round();
  EXPECT_TRUE(reads.settle(first.blocks, t.pool.run(first.ops), refuse_first).empty());
  EXPECT_FALSE(reads.blocks()[0].verified);
  EXPECT_TRUE(is(reads.blocks()[0].last_error, errc::malformed_message));
  auto second = reads.next_round();
  ASSERT_EQ(second.ops.size(), 1u);
  EXPECT_EQ(second.ops[0].remote.node, 3u);
  reads.settle(second.blocks, t.pool.run(second.ops), refuse_first);
  EXPECT_TRUE(reads.blocks()[0].verified);
  EXPECT_EQ(asked, (std::vector<size_t>{64, 64}));
}

TEST(reads_of, a_prefix_ends_at_a_key_out_of_order_or_without_usable_replicas) {
  auto at = [](uint32_t node) { return region_handle{node, node, 0, 64, 1}; };
  const std::vector<pool_protocol::block_location> found{
      {1_key, 64, 11, {at(2), at(1)}, false},
      {2_key, 64, 12, {at(2)}, true},
      {9_key, 64, 13, {at(1)}, false}, // not the key asked for
      {4_key, 64, 14, {at(1)}, false}};
  const auto keys = numbered_keys({1, 2, 3, 4});
  // Only node 1's replicas, as a worker that may not pull reads.
  auto local = [](std::vector<region_handle> rs) {
    std::erase_if(rs, [](const region_handle& h) { return h.node != 1; });
    return rs;
  };
  auto prefix = pool_batches::reads_of(found, keys, read_extent::prefix, local);
  ASSERT_EQ(prefix.size(), 1u) << "block 2 has no replica on node 1";
  EXPECT_EQ(prefix[0].replicas, (std::vector<region_handle>{at(1)}));
  EXPECT_EQ(prefix[0].checksum, 11u);

  auto all = pool_batches::reads_of(found, keys, read_extent::all);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_TRUE(all[1].from_ssd);
  EXPECT_TRUE(all[2].replicas.empty());
  EXPECT_TRUE(is(all[2].last_error, errc::not_found));
  EXPECT_EQ(all[2].key, 3_key);
  EXPECT_EQ(all[3].replicas.size(), 1u);
}

TEST(replica_writes, a_block_counts_as_written_only_if_every_replica_landed_checked) {
  auto at = [](uint32_t node, uint64_t region) { return region_handle{node, region, 0, 64, 1}; };
  const auto a = bytes_of(1, 64), b = bytes_of(2, 64);
  pool_batches::replica_writes writes;
  const std::vector<region_handle> two{at(1, 10), at(2, 20)}, one{at(3, 30)};
  EXPECT_EQ(writes.add(a, two), 0u);
  EXPECT_EQ(writes.add(b, one), 1u);
  ASSERT_EQ(writes.ops().size(), 3u);
  for (const auto& op : writes.ops()) {
    EXPECT_EQ(op.kind, transport::op_kind::write);
    EXPECT_TRUE(op.checksum) << "a replica changed on its way must fail its write";
  }
  EXPECT_EQ(writes.ops()[1].remote, at(2, 20));
  EXPECT_EQ(writes.ops()[2].local.data(), b.data());
  const std::vector<caf::error> second_failed{
      {}, make_error(errc::checksum_mismatch, "slice changed"), {}};
  EXPECT_EQ(writes.written(second_failed), (std::vector<bool>{false, true}));
  EXPECT_EQ(writes.written(std::vector<caf::error>(3)), (std::vector<bool>{true, true}));
  EXPECT_EQ(writes.written(std::vector<caf::error>(2)), (std::vector<bool>{true, false}))
      << "a write with no result did not land";
}

TEST(errors_of, names_how_each_operation_that_did_not_complete_ended) {
  std::vector<transport::op_result> results(3);
  results[0].state = transport::op_state::completed;
  results[1].state = transport::op_state::timed_out;
  results[2].state = transport::op_state::failed;
  results[2].reason = make_error(errc::unavailable, "peer gone");
  const auto errors = pool_batches::errors_of(results);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_FALSE(errors[0]);
  EXPECT_TRUE(is(errors[1], errc::internal));
  EXPECT_TRUE(is(errors[2], errc::unavailable));
}

} // namespace
} // namespace crescent
