// The client side of the pool's data path, as batches through the transfer engine: reading the
// blocks a get found (in rounds, replica after replica, each verified by its checksum) and
// writing every replica of the blocks a put_start granted. One set of rules for every client:
// the prefill worker drives them from its actor (each batch's end comes back as a message), the
// pool client library (apps/pool/pool_client) drives them blocking. Pure state: the caller
// submits the operations, reports their results, and sends what these say to the master.
#pragma once

#include "actors/store_master/pool_protocol.hpp"
#include "messages/block_key.hpp"
#include "transport/transfer_types.hpp"

#include <caf/error.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace crescent::pool_batches {

/// One result per operation of a batch: none where it completed.
std::vector<caf::error> errors_of(std::span<const transport::op_result> results);

/// One block being read: its replicas in the order to try them, and how far that got.
struct block_read {
  block_key key;
  uint64_t checksum = 0; // of the stored bytes
  std::vector<transport::region_handle> replicas;
  bool from_ssd = false; // the master read it back from an SSD tier for this get
  uint32_t next = 0;     // the replica the next read tries (read and verified once `verified`)
  bool verified = false;
  caf::error last_error; // of the last replica tried, if it failed
};

/// How a replica's bytes fill a block's buffer: exactly, or its front (blocks stored encoded,
/// at most the buffer's size).
enum class read_fit : uint8_t { exact, front };

/// Which blocks a round stops at: every block is read whatever the others do (`all`), or a
/// chain is read up to its first block with no replica left (`prefix`: the rest are of no use).
enum class read_extent : uint8_t { all, prefix };

/// A replica that read but failed its checksum: the master is to be told (ReportCorrupt).
struct corrupt_replica {
  block_key key;
  uint32_t node = 0;
};

/// Whether a verified block may be used: an error makes it a miss for this replica (a codec
/// that cannot decode it, say), and the next round tries the next one. Called with the block's
/// index and the bytes read into the front of its buffer.
using accept_fn = std::function<caf::error(size_t block, size_t bytes)>;

/// Reads blocks into their buffers in rounds. A round reads, in one batch (or several: the
/// caller may cut it), the next replica of every block not verified yet; a replica that fails,
/// or reads bytes that do not match the block's checksum, makes the next round try the next
/// one. Ends when no block has a replica left to try.
class replica_reads {
 public:
  /// One buffer per block, each at least its block's size; `blocks` in order (a chain, for
  /// `prefix`). Asserts that the sizes match: the caller builds both.
  replica_reads(std::vector<block_read> blocks, std::vector<std::span<std::byte>> out, read_fit fit,
                read_extent extent);

  struct round {
    std::vector<transport::transfer_op> ops;
    std::vector<size_t> blocks; // per op: the block it reads
  };
  /// The next round's reads; none: the reads are over.
  round next_round();

  /// Some of the round's reads ended: `blocks[k]` with `results[k]`. Returns the replicas that
  /// failed their checksum. `accept` (optional) may still refuse a verified block.
  std::vector<corrupt_replica> settle(std::span<const size_t> blocks,
                                      std::span<const caf::error> results,
                                      const accept_fn& accept = nullptr);

  /// The leading blocks that are verified.
  size_t verified_prefix() const;
  const std::vector<block_read>& blocks() const { return blocks_; }

 private:
  bool fits(const transport::region_handle& h, size_t block) const;

  std::vector<block_read> blocks_;
  std::vector<std::span<std::byte>> out_;
  read_fit fit_;
  read_extent extent_;
};

/// The blocks a get found, as reads: each block's replicas ordered by `order` (which may drop
/// some, as a worker that may not pull drops other nodes'). With `prefix`, they stop at the
/// first block that is not the next key of `keys` or has no replica left.
std::vector<block_read> reads_of(const std::vector<pool_protocol::block_location>& found,
                                 std::span<const block_key> keys, read_extent extent,
                                 const std::function<std::vector<transport::region_handle>(
                                     std::vector<transport::region_handle>)>& order = nullptr);

/// The writes of blocks to the replicas put_start granted them, all in one batch. Each write is
/// checked where it lands (an xxh3 of every slice): a replica changed on its way fails its write,
/// and its block is revoked, never committed with its checksum and found bad only when read,
/// perhaps after the node with the good copy is gone (crescent chaos, seed 285).
class replica_writes {
 public:
  /// Adds a block: `bytes` to each of `to`. Returns its index among the added blocks. Its
  /// checksum (storage::block_checksum) is taken here: each replica is checked against it where
  /// it lands (transfer_op::local_checksum), and the commit carries it (checksum()), so that
  /// what is committed is what landed.
  size_t add(std::span<const std::byte> bytes, std::span<const transport::region_handle> to);

  /// The checksum of added block `block`, for its commit.
  uint64_t checksum(size_t block) const { return checksums_[block]; }

  const std::vector<transport::transfer_op>& ops() const { return ops_; }
  size_t blocks() const { return block_ops_.size(); }

  /// Per added block, whether every one of its replicas was written (`results`: one per op).
  std::vector<bool> written(std::span<const caf::error> results) const;

 private:
  std::vector<transport::transfer_op> ops_;
  std::vector<std::vector<size_t>> block_ops_; // per block: its writes' indices in ops_
  std::vector<uint64_t> checksums_;            // per block
};

} // namespace crescent::pool_batches
