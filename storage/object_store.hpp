// The KV pool's block metadata at the store master: for every block key its size, checksum,
// state, replicas, read lease and pins. Complete blocks are persisted in RocksDB; everything
// else lives in memory. Time is passed in (nanoseconds on the caller's clock), never read here,
// so the same code runs in simulated time.
//
// What a failure loses:
// - Pending blocks (a put in progress) are never persisted: a crash forgets them, and their
//   writers' commits fail. The owners' space for them is freed by reconciliation.
// - commit() writes one synced batch (sync_commits): once it returns, the blocks survive a
//   crash of the process or the machine. If it fails, none of the batch is complete.
// - Replica changes and removals are written unsynced: a crash may bring back a replica that
//   was dropped; readers verify checksums and reconciliation with the owners drops it again.
// - Leases and soft pins are not persisted: a restarted master has granted none.
#pragma once

#include "messages/block_key.hpp"
#include "transport/region_handle.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace rocksdb {
class DB;
}

namespace crescent::storage {

struct replica {
  uint32_t node = 0;
  bool in_dram = false;
  transport::region_handle dram; // valid when in_dram
  bool on_ssd = false;
};

enum class object_state : uint8_t {
  pending,  // space reserved, bytes being written
  complete, // readable
  removed,  // forgotten, its space held until its lease ends
};

struct object_record {
  block_key key;
  uint64_t size_bytes = 0;
  uint64_t checksum = 0;
  object_state state = object_state::pending;
  std::vector<replica> replicas;
  bool hard_pin = false;         // persisted: never evicted until unpinned
  int64_t soft_pin_until_ns = 0; // not evicted before
  int64_t lease_until_ns = 0;    // a reader may be reading until then
  int64_t put_deadline_ns = 0;   // pending: reclaimed after
  // For the replica-survival invariant (docs/faults.md), in memory only (a restarted master
  // judges no block it read back): the distinct nodes that held the block when a put or a copy
  // of it was last acknowledged, and whether the pool has since removed one of its replicas on
  // purpose (an approved eviction), which lowers what a node's loss may take on purpose too.
  uint8_t acknowledged_nodes = 0;
  bool thinned = false;
};

/// Distinct nodes among a block's replicas.
uint8_t distinct_nodes(const std::vector<replica>& replicas);

struct object_options {
  bool sync_commits = true;
  uint64_t objects_max = 1u << 24;
  uint32_t nodes = 64; // the pool's nodes: replicas read back on other node ids are dropped
};

/// What open() dropped of the metadata it read back, and why: a record that cannot be decoded
/// or is filed under another key than its own (records of 64-bit keys, an older format, are)
/// or has no size; a replica on a node the pool does not have, named twice, or with a DRAM
/// handle that is not that node's or is too short. A block left with no replica is dropped
/// (a miss from then on, never wrong bytes), and what is dropped is deleted from the database.
struct load_report {
  uint64_t blocks = 0;           // loaded
  uint64_t dropped_blocks = 0;   // records dropped whole
  uint64_t dropped_replicas = 0; // replicas dropped from records that stayed or went
  std::string first_reason;      // of the first drop, for the log
};

class object_store {
 public:
  static constexpr size_t batch_max = 4096;
  static constexpr size_t replicas_max = 8;

  static caf::expected<std::unique_ptr<object_store>> open(const std::string& path,
                                                           object_options options = {});
  ~object_store();
  object_store(const object_store&) = delete;
  object_store& operator=(const object_store&) = delete;

  /// Records new pending blocks (keys must be unknown); nothing is written to disk.
  caf::error start(std::span<const object_record> records);

  /// Makes pending blocks complete with their checksums, in one synced batch.
  caf::error commit(std::span<const block_key> keys, std::span<const uint64_t> checksums);

  /// Would commit() accept these (pending keys, each once, a checksum each)? Writes nothing.
  caf::error check_commit(std::span<const block_key> keys,
                          std::span<const uint64_t> checksums) const;

  /// Abandons pending blocks; returns them so that their space can be freed. Other keys are
  /// left alone.
  std::vector<object_record> revoke(std::span<const block_key> keys);

  /// Forgets complete blocks. A leased one becomes `removed` until its lease ends (collect()
  /// returns it then); the others are returned now, for their space to be freed.
  caf::expected<std::vector<object_record>> remove(std::span<const block_key> keys, int64_t now_ns);

  /// Pending blocks past their put deadline and removed blocks past their lease, taken out and
  /// returned so that their space can be freed.
  std::vector<object_record> collect(int64_t now_ns);

  /// Replaces a complete block's replicas. With none left the block is forgotten and returned.
  caf::expected<std::vector<object_record>> set_replicas(block_key key,
                                                         std::vector<replica> replicas);

  /// Takes `node` out of every replica list; blocks left without replicas are forgotten and
  /// returned (each a miss from now on, never wrong bytes). With `keep_ssd`, the node's replicas
  /// that are on its SSD stay, as SSD-only copies: its files outlive its process, and the node
  /// may come back with them (its report then confirms each one, or drops it).
  caf::expected<std::vector<object_record>> drop_node(uint32_t node, bool keep_ssd = false);

  /// Extends a complete block's read lease to at least `until_ns`.
  void lease(block_key key, int64_t until_ns);
  caf::error pin(block_key key, bool hard, int64_t until_ns);
  caf::error unpin(block_key key);

  /// May this complete block's replica be evicted now: no lease, no pin?
  bool evictable(const object_record& r, int64_t now_ns) const;

  const object_record* find(block_key key) const;

  /// A put or a copy of this complete block was acknowledged: it is on as many nodes as its
  /// replicas name now (or more, if it was before). In memory only.
  void note_acknowledged(block_key key);
  /// The pool removed one of this block's replicas on purpose (an approved eviction).
  void note_thinned(block_key key);
  uint64_t complete_count() const { return complete_; }
  uint64_t pending_count() const { return pending_; }
  /// Blocks whose read lease has not ended at `now_ns` (a pass over every block: for stats).
  uint64_t leased_count(int64_t now_ns) const;
  /// What open() read back and what it dropped.
  const load_report& loaded() const { return loaded_; }
  /// Batches commit() wrote (each one synced write, however many blocks it held).
  uint64_t commit_writes() const { return commit_writes_; }
  size_t size() const { return objects_.size(); }

  /// Every block, for reconciliation and stats.
  template <class F>
  void for_each(F&& f) const {
    for (const auto& [key, r] : objects_)
      f(r);
  }

 private:
  object_store(std::unique_ptr<rocksdb::DB> db, object_options options);
  caf::error load();
  caf::error persist(const object_record& r, bool sync);
  caf::error forget(block_key key, bool sync);
  std::vector<object_record> take(std::vector<block_key> keys);

  std::unique_ptr<rocksdb::DB> db_;
  load_report loaded_;
  object_options options_;
  std::unordered_map<block_key, object_record> objects_;
  std::unordered_set<block_key> transient_; // keys of pending and removed blocks
  uint64_t complete_ = 0;
  uint64_t pending_ = 0;
  uint64_t commit_writes_ = 0;
};

std::string encode_object(const object_record& r);
caf::expected<object_record> decode_object(std::string_view bytes);

} // namespace crescent::storage
