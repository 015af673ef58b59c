// Block metadata of the KV pool, persisted in RocksDB (write-ahead log on).
//
// Each block key maps to one record: where its bytes live (node, region handle), their size and
// checksum, and a state (pending while being written, complete once readable). Reads are served
// from an in-memory index loaded at open; every change goes to RocksDB first.
//
// What a failure loses:
// - put_pending writes are not synced: a crash may forget a pending record, which is a put that
//   never happened (its writer gets an error on commit and its bytes are never read).
// - commit writes one synced batch: once it returns, the records survive a crash of the process
//   or the machine. If it fails, none of the batch is complete.
// - open() drops pending records left by a crash, because nobody will ever commit them.
#pragma once

#include "transport/region_handle.hpp"

#include <caf/expected.hpp>

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

enum class block_state : uint8_t { pending, complete };

struct block_record {
  uint64_t key = 0;
  transport::region_handle handle; // handle.node is the owning node
  uint64_t size_bytes = 0;
  uint64_t checksum = 0;
  block_state state = block_state::pending;
};

struct metadata_options {
  /// Sync committed batches to disk before acknowledging (off only for throwaway clusters).
  bool sync_commits = true;
  /// Records the store may hold; puts beyond it fail with limit_exceeded.
  uint64_t records_max = 1u << 24;
};

class metadata_store {
 public:
  static constexpr size_t batch_max = 4096;

  /// Opens (or creates) the database at `path` and loads every complete record.
  static caf::expected<std::unique_ptr<metadata_store>> open(const std::string& path,
                                                             metadata_options options = {});

  ~metadata_store();
  metadata_store(const metadata_store&) = delete;
  metadata_store& operator=(const metadata_store&) = delete;

  /// Records new pending blocks. Errors if a key already has a record (nothing is written).
  caf::error put_pending(std::span<const block_record> records);

  /// Makes pending blocks complete with their checksums, in one synced batch. Errors if a key
  /// is not pending (nothing is written).
  caf::error commit(std::span<const uint64_t> keys, std::span<const uint64_t> checksums);

  /// Forgets records in any state; unknown keys are ignored. Returns the erased records.
  caf::expected<std::vector<block_record>> erase(std::span<const uint64_t> keys);

  std::optional<block_record> find(uint64_t key) const;

  uint64_t complete_count() const { return complete_; }
  uint64_t pending_count() const { return index_.size() - complete_; }

 private:
  metadata_store(std::unique_ptr<rocksdb::DB> db, metadata_options options);
  caf::error load();

  std::unique_ptr<rocksdb::DB> db_;
  metadata_options options_;
  std::unordered_map<uint64_t, block_record> index_;
  uint64_t complete_ = 0;
};

/// Encodes a record as the Cap'n Proto bytes stored in RocksDB (wire::BlockRecord).
std::string encode_record(const block_record& record);
caf::expected<block_record> decode_record(std::string_view bytes);

} // namespace crescent::storage
