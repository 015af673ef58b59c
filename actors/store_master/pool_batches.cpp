#include "actors/store_master/pool_batches.hpp"

#include "actors/common/code_probe.hpp"
#include "messages/errors.hpp"
#include "storage/checksum.hpp"

#include <cassert>
#include <string>
#include <utility>

namespace crescent::pool_batches {

std::vector<caf::error> errors_of(std::span<const transport::op_result> results) {
  std::vector<caf::error> out;
  out.reserve(results.size());
  for (const auto& r : results) {
    if (r.state == transport::op_state::completed)
      out.emplace_back();
    else
      out.push_back(r.reason ? r.reason
                             : make_error(errc::internal, std::string{"a transfer ended "} +
                                                              transport::to_string(r.state)));
  }
  return out;
}

replica_reads::replica_reads(std::vector<block_read> blocks, std::vector<std::span<std::byte>> out,
                             read_fit fit, read_extent extent)
    : blocks_(std::move(blocks)), out_(std::move(out)), fit_(fit), extent_(extent) {
  assert(out_.size() == blocks_.size());
}

bool replica_reads::fits(const transport::region_handle& h, size_t block) const {
  const auto size = out_[block].size();
  return fit_ == read_fit::exact ? h.length == size : h.length > 0 && h.length <= size;
}

replica_reads::round replica_reads::next_round() {
  round r;
  for (size_t i = 0; i < blocks_.size(); ++i) {
    auto& b = blocks_[i];
    if (b.verified)
      continue;
    while (b.next < b.replicas.size() && !fits(b.replicas[b.next], i)) {
      b.last_error = make_error(errc::invalid_argument, "replica of the wrong size");
      ++b.next;
    }
    if (b.next == b.replicas.size()) {
      if (extent_ == read_extent::prefix)
        break; // later blocks are of no use
      continue;
    }
    const auto& h = b.replicas[b.next];
    r.ops.push_back({transport::op_kind::read, out_[i].first(h.length), h});
    r.blocks.push_back(i);
  }
  return r;
}

std::vector<corrupt_replica> replica_reads::settle(std::span<const size_t> blocks,
                                                   std::span<const caf::error> results,
                                                   const accept_fn& accept) {
  assert(blocks.size() == results.size());
  std::vector<corrupt_replica> corrupt;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const size_t i = blocks[k];
    assert(i < blocks_.size());
    auto& b = blocks_[i];
    assert(!b.verified && b.next < b.replicas.size());
    const auto& h = b.replicas[b.next];
    if (results[k]) {
      CRESCENT_PROBE("pool.read_failed_next_replica");
      b.last_error = results[k];
      ++b.next;
      continue;
    }
    if (storage::block_checksum(out_[i].first(h.length)) != b.checksum) {
      CRESCENT_PROBE("pool.read_corrupt_replica");
      corrupt.push_back({b.key, h.node});
      b.last_error = make_error(errc::checksum_mismatch, "block " + to_string(b.key));
      ++b.next;
      continue;
    }
    if (auto err = accept ? accept(i, h.length) : caf::error{}) {
      b.last_error = std::move(err);
      ++b.next;
      continue;
    }
    b.verified = true;
  }
  return corrupt;
}

size_t replica_reads::verified_prefix() const {
  size_t n = 0;
  while (n < blocks_.size() && blocks_[n].verified)
    ++n;
  return n;
}

std::vector<block_read> reads_of(const std::vector<pool_protocol::block_location>& found,
                                 std::span<const block_key> keys, read_extent extent,
                                 const std::function<std::vector<transport::region_handle>(
                                     std::vector<transport::region_handle>)>& order) {
  std::vector<block_read> out;
  for (size_t i = 0; i < found.size() && i < keys.size(); ++i) {
    block_read b;
    b.key = keys[i];
    if (found[i].key == keys[i]) {
      b.checksum = found[i].checksum;
      b.replicas = order ? order(found[i].replicas) : found[i].replicas;
      b.from_ssd = found[i].from_ssd;
    }
    if (extent == read_extent::prefix && b.replicas.empty())
      break;
    if (b.replicas.empty())
      b.last_error = make_error(errc::not_found, "block " + to_string(b.key) + " is not stored");
    out.push_back(std::move(b));
  }
  return out;
}

size_t replica_writes::add(std::span<const std::byte> bytes,
                           std::span<const transport::region_handle> to) {
  const uint64_t checksum = checksums_.emplace_back(storage::block_checksum(bytes));
  auto& mine = block_ops_.emplace_back();
  for (const auto& h : to) {
    mine.push_back(ops_.size());
    // The engine only reads `local` for a write.
    transport::transfer_op op{transport::op_kind::write,
                              {const_cast<std::byte*>(bytes.data()), bytes.size()},
                              h,
                              0,
                              true};
    op.local_checksum = checksum;
    ops_.push_back(op);
  }
  return block_ops_.size() - 1;
}

std::vector<bool> replica_writes::written(std::span<const caf::error> results) const {
  std::vector<bool> out(block_ops_.size(), true);
  for (size_t i = 0; i < block_ops_.size(); ++i)
    for (auto op : block_ops_[i])
      out[i] = out[i] && op < results.size() && !results[op];
  return out;
}

} // namespace crescent::pool_batches
