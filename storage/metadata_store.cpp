#include "storage/metadata_store.hpp"

#include "messages/errors.hpp"

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include <array>
#include <unordered_set>

namespace crescent::storage {

namespace {

constexpr char key_prefix = 'b';

// 'b' + big-endian key: blocks sort by key and nothing else shares the prefix.
std::string db_key(uint64_t key) {
  std::string out(9, '\0');
  out[0] = key_prefix;
  for (int i = 0; i < 8; ++i)
    out[1 + i] = static_cast<char>((key >> (56 - 8 * i)) & 0xff);
  return out;
}

caf::error io_error(const char* what, const rocksdb::Status& status) {
  return make_error(errc::io_error, std::string{what} + ": " + status.ToString());
}

} // namespace

caf::expected<std::unique_ptr<metadata_store>> metadata_store::open(const std::string& path,
                                                                    metadata_options options) {
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  auto status = rocksdb::DB::Open(db_options, path, &raw);
  if (!status.ok())
    return io_error(("cannot open block metadata at " + path).c_str(), status);
  std::unique_ptr<metadata_store> store{
      new metadata_store(std::unique_ptr<rocksdb::DB>{raw}, options)};
  if (auto err = store->load())
    return err;
  return store;
}

metadata_store::metadata_store(std::unique_ptr<rocksdb::DB> db, metadata_options options)
    : db_(std::move(db)), options_(options) {}

metadata_store::~metadata_store() = default;

caf::error metadata_store::load() {
  rocksdb::WriteBatch stale;
  std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator(rocksdb::ReadOptions{})};
  for (it->Seek(std::string(1, key_prefix)); it->Valid() && it->key()[0] == key_prefix;
       it->Next()) {
    auto record = decode_record(std::string_view{it->value().data(), it->value().size()});
    if (!record)
      return make_error(errc::io_error, "block metadata is corrupt: " + describe(record.error()));
    if (record->state != block_state::complete) {
      stale.Delete(it->key());
      continue;
    }
    index_.emplace(record->key, *record);
    ++complete_;
  }
  if (!it->status().ok())
    return io_error("cannot read block metadata", it->status());
  if (stale.Count() > 0) {
    auto status = db_->Write(rocksdb::WriteOptions{}, &stale);
    if (!status.ok())
      return io_error("cannot drop stale pending records", status);
  }
  return caf::none;
}

caf::error metadata_store::put_pending(std::span<const block_record> records) {
  if (records.size() > batch_max)
    return make_error(errc::limit_exceeded, "put batch above " + std::to_string(batch_max));
  if (index_.size() + records.size() > options_.records_max)
    return make_error(errc::limit_exceeded, "block metadata is full");
  std::unordered_set<uint64_t> seen;
  rocksdb::WriteBatch batch;
  for (const auto& r : records) {
    if (index_.count(r.key) != 0 || !seen.insert(r.key).second)
      return make_error(errc::already_exists, "block " + std::to_string(r.key) + " exists");
    block_record pending = r;
    pending.state = block_state::pending;
    batch.Put(db_key(r.key), encode_record(pending));
  }
  auto status = db_->Write(rocksdb::WriteOptions{}, &batch);
  if (!status.ok())
    return io_error("cannot record pending blocks", status);
  for (const auto& r : records) {
    auto& stored = index_[r.key] = r;
    stored.state = block_state::pending;
  }
  return caf::none;
}

caf::error metadata_store::commit(std::span<const uint64_t> keys,
                                  std::span<const uint64_t> checksums) {
  if (keys.size() != checksums.size())
    return make_error(errc::invalid_argument, "commit needs one checksum per key");
  if (keys.size() > batch_max)
    return make_error(errc::limit_exceeded, "commit batch above " + std::to_string(batch_max));
  rocksdb::WriteBatch batch;
  std::unordered_set<uint64_t> seen;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (!seen.insert(keys[i]).second)
      return make_error(errc::invalid_argument,
                        "block " + std::to_string(keys[i]) + " appears twice in one commit");
    auto found = index_.find(keys[i]);
    if (found == index_.end() || found->second.state != block_state::pending)
      return make_error(errc::not_found, "block " + std::to_string(keys[i]) + " is not pending");
    block_record done = found->second;
    done.checksum = checksums[i];
    done.state = block_state::complete;
    batch.Put(db_key(keys[i]), encode_record(done));
  }
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync_commits;
  auto status = db_->Write(write_options, &batch);
  if (!status.ok())
    return io_error("cannot commit blocks", status);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto& r = index_[keys[i]];
    r.checksum = checksums[i];
    r.state = block_state::complete;
    ++complete_;
  }
  return caf::none;
}

caf::expected<std::vector<block_record>> metadata_store::erase(std::span<const uint64_t> keys) {
  if (keys.size() > batch_max)
    return make_error(errc::limit_exceeded, "erase batch above " + std::to_string(batch_max));
  rocksdb::WriteBatch batch;
  std::vector<block_record> erased;
  std::unordered_set<uint64_t> seen;
  for (auto key : keys) {
    auto found = index_.find(key);
    if (found == index_.end() || !seen.insert(key).second)
      continue;
    batch.Delete(db_key(key));
    erased.push_back(found->second);
  }
  rocksdb::WriteOptions write_options;
  write_options.sync = options_.sync_commits;
  auto status = db_->Write(write_options, &batch);
  if (!status.ok())
    return io_error("cannot erase blocks", status);
  for (const auto& r : erased) {
    if (r.state == block_state::complete)
      --complete_;
    index_.erase(r.key);
  }
  return erased;
}

std::optional<block_record> metadata_store::find(uint64_t key) const {
  auto found = index_.find(key);
  if (found == index_.end())
    return std::nullopt;
  return found->second;
}

} // namespace crescent::storage
