#include "storage/object_store.hpp"

#include "messages/errors.hpp"

#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <unordered_set>

namespace crescent::storage {

namespace {

constexpr char key_prefix = 'o';

// The prefix and the key's 16 big-endian bytes.
std::string db_key(const block_key& key) {
  std::string out(17, '\0');
  out[0] = key_prefix;
  store_be(key, out.data() + 1);
  return out;
}

caf::error db_error(const std::string& what, const rocksdb::Status& s) {
  return make_error(s.IsNoSpace() ? errc::no_space : errc::io_error, what + ": " + s.ToString());
}

caf::error check_batch(size_t n) {
  if (n > object_store::batch_max)
    return make_error(errc::limit_exceeded, "a batch holds at most 4096 blocks");
  return caf::none;
}

} // namespace

caf::expected<std::unique_ptr<object_store>> object_store::open(const std::string& path,
                                                                object_options options) {
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(db_options, path, &raw);
  if (!s.ok())
    return db_error("cannot open block metadata at " + path, s);
  std::unique_ptr<object_store> store{new object_store(std::unique_ptr<rocksdb::DB>{raw}, options)};
  if (auto err = store->load())
    return err;
  return store;
}

object_store::object_store(std::unique_ptr<rocksdb::DB> db, object_options options)
    : db_(std::move(db)), options_(options) {}

object_store::~object_store() = default;

namespace {

constexpr uint64_t stored_block_bytes_max = 64ull << 20; // as puts allow

// Why a replica read back cannot be served: empty when it can.
std::string replica_fault(const replica& x, uint64_t size_bytes, uint32_t nodes,
                          uint64_t seen_nodes) {
  if (x.node >= nodes)
    return "a replica on node " + std::to_string(x.node) + " of a pool of " + std::to_string(nodes);
  if (x.node < 64 && (seen_nodes >> x.node & 1) != 0)
    return "two replicas on node " + std::to_string(x.node);
  if (!x.in_dram && !x.on_ssd)
    return "a replica neither in DRAM nor on SSD";
  if (x.in_dram && (x.dram.node != x.node || x.dram.length < size_bytes))
    return "a DRAM handle of another node or too short";
  return {};
}

} // namespace

// Serves what it can: a record or replica that cannot be right is dropped, deleted and counted
// (loaded()), instead of failing the master's start or indexing the node table out of bounds.
caf::error object_store::load() {
  std::unique_ptr<rocksdb::Iterator> it{db_->NewIterator(rocksdb::ReadOptions{})};
  std::vector<std::string> gone;       // database keys to delete
  std::vector<object_record> repaired; // records that lost replicas
  auto note = [&](const std::string& why) {
    if (loaded_.first_reason.empty())
      loaded_.first_reason = why;
  };
  for (it->Seek(std::string(1, key_prefix)); it->Valid() && it->key()[0] == key_prefix;
       it->Next()) {
    auto r = decode_object({it->value().data(), it->value().size()});
    if (r && (r->size_bytes == 0 || r->size_bytes > stored_block_bytes_max))
      r = make_error(errc::malformed_message,
                     "a block of " + std::to_string(r->size_bytes) + " bytes");
    // A record filed under another key, or under a 64-bit key by a version before 128-bit
    // keys (whose record reads back with an empty key), names no block that can be asked for.
    if (r && it->key() != rocksdb::Slice{db_key(r->key)})
      r = make_error(errc::malformed_message,
                     it->key().size() == 9 ? "a record under a 64-bit block key (an older format)"
                                           : "a record filed under another block's key");
    if (!r) {
      note(describe(r.error()));
      ++loaded_.dropped_blocks;
      gone.push_back(it->key().ToString());
      continue;
    }
    std::vector<replica> kept;
    uint64_t seen = 0;
    for (const auto& x : r->replicas) {
      if (auto why = replica_fault(x, r->size_bytes, options_.nodes, seen); !why.empty()) {
        note("block " + to_string(r->key) + ": " + why);
        ++loaded_.dropped_replicas;
        continue;
      }
      if (x.node < 64)
        seen |= uint64_t{1} << x.node;
      kept.push_back(x);
    }
    if (kept.empty()) {
      ++loaded_.dropped_blocks;
      gone.push_back(it->key().ToString());
      continue;
    }
    if (kept.size() != r->replicas.size()) {
      r->replicas = std::move(kept);
      repaired.push_back(*r);
    }
    objects_.emplace(r->key, std::move(*r));
    ++complete_;
  }
  if (!it->status().ok())
    return db_error("cannot read block metadata", it->status());
  loaded_.blocks = complete_;
  for (const auto& key : gone)
    if (auto s = db_->Delete(rocksdb::WriteOptions{}, key); !s.ok())
      return db_error("cannot drop a bad block record", s);
  for (const auto& r : repaired)
    if (auto err = persist(r, false))
      return err;
  return caf::none;
}

caf::error object_store::persist(const object_record& r, bool sync) {
  rocksdb::WriteOptions w;
  w.sync = sync && options_.sync_commits;
  auto s = db_->Put(w, db_key(r.key), encode_object(r));
  return s.ok() ? caf::none : db_error("cannot record block " + to_string(r.key), s);
}

caf::error object_store::forget(block_key key, bool sync) {
  rocksdb::WriteOptions w;
  w.sync = sync && options_.sync_commits;
  auto s = db_->Delete(w, db_key(key));
  return s.ok() ? caf::none : db_error("cannot forget block " + to_string(key), s);
}

uint8_t distinct_nodes(const std::vector<replica>& replicas) {
  std::vector<uint32_t> nodes;
  for (const auto& x : replicas)
    if (std::find(nodes.begin(), nodes.end(), x.node) == nodes.end())
      nodes.push_back(x.node);
  return static_cast<uint8_t>(nodes.size()); // at most replicas_max
}

void object_store::note_acknowledged(block_key key) {
  auto i = objects_.find(key);
  if (i == objects_.end() || i->second.state != object_state::complete)
    return;
  auto& r = i->second;
  r.acknowledged_nodes = std::max(r.acknowledged_nodes, distinct_nodes(r.replicas));
}

void object_store::note_thinned(block_key key) {
  if (auto i = objects_.find(key); i != objects_.end())
    i->second.thinned = true;
}

std::vector<object_record> object_store::take(std::vector<block_key> keys) {
  std::vector<object_record> out;
  for (auto key : keys) {
    auto i = objects_.find(key);
    if (i == objects_.end())
      continue;
    if (i->second.state == object_state::complete)
      --complete_;
    else if (i->second.state == object_state::pending)
      --pending_;
    if (i->second.state != object_state::complete)
      transient_.erase(key);
    out.push_back(std::move(i->second));
    objects_.erase(i);
  }
  return out;
}

caf::error object_store::start(std::span<const object_record> records) {
  if (auto err = check_batch(records.size()))
    return err;
  if (objects_.size() + records.size() > options_.objects_max)
    return make_error(errc::limit_exceeded, "block metadata is full");
  std::unordered_set<block_key> seen;
  for (const auto& r : records) {
    if (objects_.count(r.key) != 0 || !seen.insert(r.key).second)
      return make_error(errc::already_exists, "block " + to_string(r.key) + " exists");
    if (r.replicas.empty() || r.replicas.size() > replicas_max)
      return make_error(errc::invalid_argument, "a block has 1 to 8 replicas");
  }
  for (const auto& r : records) {
    auto& stored = objects_[r.key] = r;
    stored.state = object_state::pending;
    transient_.insert(r.key);
    ++pending_;
  }
  return caf::none;
}

caf::error object_store::check_commit(std::span<const block_key> keys,
                                      std::span<const uint64_t> checksums) const {
  if (keys.size() != checksums.size())
    return make_error(errc::invalid_argument, "commit needs one checksum per key");
  if (auto err = check_batch(keys.size()))
    return err;
  std::unordered_set<block_key> seen;
  for (auto key : keys) {
    auto found = objects_.find(key);
    if (found == objects_.end() || found->second.state != object_state::pending ||
        !seen.insert(key).second)
      return make_error(errc::not_found, "block " + to_string(key) + " is not pending");
  }
  return caf::none;
}

caf::error object_store::commit(std::span<const block_key> keys,
                                std::span<const uint64_t> checksums) {
  if (auto err = check_commit(keys, checksums))
    return err;
  rocksdb::WriteBatch batch;
  for (size_t i = 0; i < keys.size(); ++i) {
    object_record done = objects_.at(keys[i]);
    done.checksum = checksums[i];
    batch.Put(db_key(keys[i]), encode_object(done));
  }
  rocksdb::WriteOptions w;
  w.sync = options_.sync_commits;
  if (auto s = db_->Write(w, &batch); !s.ok())
    return db_error("cannot commit blocks", s);
  ++commit_writes_;
  for (size_t i = 0; i < keys.size(); ++i) {
    auto& r = objects_[keys[i]];
    r.checksum = checksums[i];
    r.state = object_state::complete;
    transient_.erase(keys[i]);
    --pending_;
    ++complete_;
  }
  return caf::none;
}

std::vector<object_record> object_store::revoke(std::span<const block_key> keys) {
  std::vector<block_key> pending;
  for (auto key : keys)
    if (auto r = find(key); r != nullptr && r->state == object_state::pending)
      pending.push_back(key);
  return take(std::move(pending));
}

caf::expected<std::vector<object_record>> object_store::remove(std::span<const block_key> keys,
                                                               int64_t now_ns) {
  if (auto err = check_batch(keys.size()))
    return err;
  std::vector<block_key> gone;
  for (auto key : keys) {
    auto i = objects_.find(key);
    if (i == objects_.end() || i->second.state != object_state::complete)
      continue;
    if (auto err = forget(key, false))
      return err;
    if (i->second.lease_until_ns > now_ns) {
      i->second.state = object_state::removed; // its space waits for the lease to end
      transient_.insert(key);
      --complete_;
      continue;
    }
    gone.push_back(key);
  }
  return take(std::move(gone));
}

// Looks at pending and removed blocks only: the master sweeps twice a second, and a pool of a
// paper cluster holds ~100k complete blocks that a scan of every block would walk each time.
std::vector<object_record> object_store::collect(int64_t now_ns) {
  std::vector<block_key> due;
  for (auto key : transient_) {
    const auto& r = objects_.at(key);
    if (r.state == object_state::pending && r.put_deadline_ns <= now_ns)
      due.push_back(key);
    else if (r.state == object_state::removed && r.lease_until_ns <= now_ns)
      due.push_back(key);
  }
  std::sort(due.begin(), due.end()); // the same order whatever the set's
  return take(std::move(due));
}

caf::expected<std::vector<object_record>>
object_store::set_replicas(block_key key, std::vector<replica> replicas) {
  auto i = objects_.find(key);
  if (i == objects_.end() || i->second.state != object_state::complete)
    return make_error(errc::not_found, "block " + to_string(key) + " is not complete");
  if (replicas.size() > replicas_max)
    return make_error(errc::invalid_argument, "a block has at most 8 replicas");
  if (replicas.empty()) {
    if (auto err = forget(key, false))
      return err;
    return take({key});
  }
  object_record updated = i->second;
  updated.replicas = std::move(replicas);
  if (auto err = persist(updated, false))
    return err;
  i->second = std::move(updated);
  return std::vector<object_record>{};
}

caf::expected<std::vector<object_record>> object_store::drop_node(uint32_t node, bool keep_ssd) {
  std::vector<object_record> lost;
  std::vector<block_key> pending_lost;
  std::vector<block_key> keys;
  for (const auto& [key, r] : objects_)
    if (std::any_of(r.replicas.begin(), r.replicas.end(),
                    [&](const replica& x) { return x.node == node; }))
      keys.push_back(key);
  for (auto key : keys) {
    auto& r = objects_.at(key);
    std::vector<replica> left;
    for (auto x : r.replicas) {
      if (x.node == node) {
        if (!keep_ssd || !x.on_ssd || r.state != object_state::complete)
          continue;
        x.in_dram = false; // the DRAM copy died with the process
        x.dram = {};
      }
      left.push_back(x);
    }
    if (r.state != object_state::complete) {
      r.replicas = std::move(left); // pending and removed blocks are not persisted
      if (r.replicas.empty())
        pending_lost.push_back(key);
      continue;
    }
    auto gone = set_replicas(key, std::move(left));
    if (!gone)
      return std::move(gone.error());
    lost.insert(lost.end(), gone->begin(), gone->end());
  }
  auto more = take(std::move(pending_lost));
  lost.insert(lost.end(), more.begin(), more.end());
  return lost;
}

uint64_t object_store::leased_count(int64_t now_ns) const {
  uint64_t n = 0;
  for (const auto& [key, r] : objects_)
    n += r.lease_until_ns > now_ns ? 1 : 0;
  return n;
}

void object_store::lease(block_key key, int64_t until_ns) {
  auto i = objects_.find(key);
  if (i != objects_.end() && i->second.state == object_state::complete)
    i->second.lease_until_ns = std::max(i->second.lease_until_ns, until_ns);
}

caf::error object_store::pin(block_key key, bool hard, int64_t until_ns) {
  auto i = objects_.find(key);
  if (i == objects_.end() || i->second.state != object_state::complete)
    return make_error(errc::not_found, "block " + to_string(key) + " is not complete");
  if (!hard) {
    i->second.soft_pin_until_ns = std::max(i->second.soft_pin_until_ns, until_ns);
    return caf::none;
  }
  object_record updated = i->second;
  updated.hard_pin = true;
  if (auto err = persist(updated, true))
    return err;
  i->second.hard_pin = true;
  return caf::none;
}

caf::error object_store::unpin(block_key key) {
  auto i = objects_.find(key);
  if (i == objects_.end() || i->second.state != object_state::complete)
    return make_error(errc::not_found, "block " + to_string(key) + " is not complete");
  i->second.soft_pin_until_ns = 0;
  if (i->second.hard_pin) {
    object_record updated = i->second;
    updated.hard_pin = false;
    if (auto err = persist(updated, true))
      return err;
    i->second.hard_pin = false;
  }
  return caf::none;
}

bool object_store::evictable(const object_record& r, int64_t now_ns) const {
  return r.state == object_state::complete && r.lease_until_ns <= now_ns && !r.hard_pin &&
         r.soft_pin_until_ns <= now_ns;
}

const object_record* object_store::find(block_key key) const {
  auto i = objects_.find(key);
  return i == objects_.end() ? nullptr : &i->second;
}

} // namespace crescent::storage
