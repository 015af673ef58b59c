// A block owner's SSD tier: blocks in one data file, their places in a node-local RocksDB index.
//
// I/O goes through io_uring where the kernel allows it, pread/pwrite otherwise. Space in the file
// comes from a range_allocator rebuilt from the index at open, so a restarted owner finds every
// block it had stored.
//
// What a failure loses:
// - put() writes the bytes, syncs them (sync_writes), then records the block in the index with a
//   synced write. A put that returned an error recorded nothing; its space is free again.
// - A crash between the data sync and the index write loses that block (never acknowledged).
// - remove() is not synced: after a crash a removed block may reappear, pointing at space that
//   was reused; its checksum then fails on read, which is a miss, never wrong data.
// - get() verifies the checksum recorded at put(): a mismatch is errc::checksum_mismatch.
//
// Not thread-safe: owned by one block owner actor.
#pragma once

#include "messages/block_key.hpp"
#include "storage/range_allocator.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace rocksdb {
class DB;
}

namespace crescent::storage {

struct ssd_options {
  std::string directory; // holds blocks.data and index/
  uint64_t capacity_bytes = 1ull << 30;
  uint64_t unit_bytes = 4096;
  uint32_t blocks_max = 1u << 20;
  bool use_io_uring = true;
  bool sync_writes = true;
};

struct ssd_block {
  block_key key;
  uint64_t offset = 0;
  uint64_t size_bytes = 0;
  uint64_t checksum = 0;
};

class ssd_tier {
 public:
  static caf::expected<std::unique_ptr<ssd_tier>> open(const ssd_options& options);
  ~ssd_tier();
  ssd_tier(const ssd_tier&) = delete;
  ssd_tier& operator=(const ssd_tier&) = delete;

  /// Stores a block. Errors: already_exists, no_space (the tier or the disk is full),
  /// io_error.
  caf::error put(block_key key, std::span<const std::byte> bytes, uint64_t checksum);

  /// Reads a block into `out` (exactly its size) and verifies its checksum.
  caf::error get(block_key key, std::span<std::byte> out);

  /// Forgets a block and frees its space; unknown keys are not an error.
  caf::error remove(block_key key);

  std::optional<ssd_block> find(block_key key) const;
  std::vector<ssd_block> blocks() const;

  uint64_t used_bytes() const { return space_.used_bytes(); }
  uint64_t capacity_bytes() const { return space_.capacity_bytes(); }
  /// "io_uring" or "pread/pwrite".
  const char* io_engine() const;

 private:
  struct io;
  explicit ssd_tier(const ssd_options& options);
  caf::error load_index();

  ssd_options options_;
  int fd_ = -1;
  std::unique_ptr<io> io_;
  std::unique_ptr<rocksdb::DB> index_;
  range_allocator space_;
  struct placed {
    ssd_block block;
    range where;
  };
  std::unordered_map<block_key, placed> blocks_;
};

} // namespace crescent::storage
