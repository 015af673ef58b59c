// State and handlers of the store master, split by concern: puts (put.cpp), reads and block
// management (read.cpp), owners (owners.cpp), the actor itself (store_master.cpp).
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/common/handler_guard.hpp"
#include "actors/store_master/store_master.hpp"
#include "transport/transfer_types.hpp"

#include <caf/actor_clock.hpp>
#include <caf/typed_response_promise.hpp>

#include <functional>
#include <optional>
#include <random>
#include <unordered_map>
#include <vector>

namespace crescent {

struct node_view {
  block_owner_actor owner; // learned from the directory or from the owner's report
  bool alive = false;      // has an owner that reported and keeps heartbeating
  caf::actor_clock::time_point last_seen;
  caf::actor_clock::time_point lost_at; // when it left the pool
  bool ssd_waiting = false;             // left, and its SSD replicas wait for it
  bool member = true; // in the conductor's view (NodeStatus); a non-member's owner cannot rejoin
  uint64_t dram_capacity_bytes = 0; // 0: not heard of yet
  uint64_t dram_used_bytes = 0;     // last report plus what was allocated since
  uint64_t ssd_write_errors = 0;    // as of the last heartbeat
  uint64_t ssd_read_errors = 0;
  std::optional<transport::peer_info> peer; // how other processes reach its memory
};

/// A put_commit waiting for the next synced write (group commit).
struct queued_commit {
  std::vector<block_key> keys;
  std::vector<uint64_t> checksums;
  caf::typed_response_promise<caf::unit_t> promise;
};

// An allocation an owner has not answered yet. The owner's loss answers it (with nothing): a
// proxy of a lost process may drop the request without an error, and the put that waits for
// it must not wait out its timeout.
struct pending_allocation {
  uint32_t node = 0;
  std::function<void(std::vector<transport::region_handle>)> done;
};

/// One more replica of a complete block, granted and being written (a replicate put).
struct pending_replica {
  uint32_t node = 0;
  transport::region_handle handle;
  int64_t deadline_ns = 0; // reclaimed after
  caf::actor_addr writer;  // whose put_start granted it: only it commits or revokes it
};

struct master_state {
  static inline const char* name = "store_master";
  store_master_options options;
  std::shared_ptr<storage::object_store> objects;
  directory_ref dir;
  std::vector<node_view> nodes;
  std::mt19937_64 rng;
  bool started = false;
  bad_message_counter bad;
  uint64_t corrupt_reports = 0;
  uint64_t intact_on_verify = 0;   // reported corrupt by a reader, intact at its owner: kept
  uint64_t unverified_reports = 0; // reported corrupt, the owner gave no answer: kept
  uint64_t reclaimed = 0;
  uint64_t lost = 0;
  // Of the lost blocks, those acknowledged on two or more nodes and never thinned by an
  // approved eviction: what one node's loss must not take (docs/faults.md, the invariants).
  uint64_t lost_replicated = 0;
  std::vector<bool> ever_lost; // by node: it left the pool at least once in this master's life
  uint64_t approved = 0;
  uint64_t refused = 0;
  std::vector<queued_commit> commits; // acknowledged by the next flush_commits
  bool commit_flush_sent = false;     // a flush message is in the mailbox
  std::unordered_map<uint64_t, pending_allocation> allocations;
  std::unordered_map<block_key, pending_replica> replica_puts; // by key: one at a time
  // Pending blocks: whose put_start recorded them. Only that actor commits or revokes them, so
  // that nobody else can make readable, or take back, blocks it did not write. Entries of blocks
  // no longer pending go at the next sweep.
  std::unordered_map<block_key, caf::actor_addr> writers;
  uint64_t replicas_added = 0;
  uint64_t next_allocation = 0;
};

using master_ptr = store_master_actor::stateful_pointer<master_state>;

int64_t now_ns(master_ptr self);

// put.cpp
caf::result<typed_envelope<wire::PutStartReply>>
on_put_start(master_ptr self, const typed_envelope<wire::PutStart>& msg);
caf::result<void> on_put_commit(master_ptr self, const typed_envelope<wire::PutCommit>& msg);
caf::result<void> on_put_revoke(master_ptr self, const typed_envelope<wire::PutRevoke>& msg);
/// Frees replicas granted and never committed, past their deadline (the sweep).
void reclaim_replica_puts(master_ptr self);
/// Writes the queued commits in one synced batch (at most batch_max keys; the rest next) and
/// acknowledges them.
void flush_commits(master_ptr self);
/// Answers the allocations still owed by `node`'s owner with nothing (it is lost).
void abandon_allocations(master_ptr self, uint32_t node);
/// Forgets the writers of blocks that are no longer pending (the sweep).
void forget_writers(master_ptr self);
// read.cpp
caf::result<typed_envelope<wire::GetReply>> on_get(master_ptr self,
                                                   const typed_envelope<wire::Get>& msg);
caf::result<typed_envelope<wire::ExistsReply>> on_exists(master_ptr self,
                                                         const typed_envelope<wire::Exists>& msg);
caf::result<void> on_remove(master_ptr self, const typed_envelope<wire::Remove>& msg);
caf::result<void> on_pin(master_ptr self, const typed_envelope<wire::Pin>& msg);
caf::result<void> on_unpin(master_ptr self, const typed_envelope<wire::Unpin>& msg);
caf::result<void> on_corrupt(master_ptr self, const typed_envelope<wire::ReportCorrupt>& msg);
// owners.cpp
caf::result<void> on_owner_heartbeat(master_ptr self,
                                     const typed_envelope<wire::OwnerHeartbeat>& msg);
caf::result<typed_envelope<wire::OwnerReportReply>>
on_owner_report(master_ptr self, const typed_envelope<wire::OwnerReport>& msg);
caf::result<typed_envelope<wire::EvictReply>>
on_evict(master_ptr self, const typed_envelope<wire::EvictRequest>& msg);
void sweep(master_ptr self);
void node_lost(master_ptr self, uint32_t node, const char* why);
void on_node_status(master_ptr self, const typed_envelope<wire::NodeStatus>& msg);
/// Whether the conductor's view decides which nodes are in the pool (a cluster), rather than the
/// owners' own heartbeats (a master without a conductor: the pool's own processes).
bool conductor_decides_membership(const master_state& st);

/// A replica's node is live. Out of range is dead: the metadata's node ids are checked when it
/// is read back (object_store::load), and this keeps any other slip from indexing past the table.
bool live(const master_state& st, uint32_t node);

/// Where a block can be read now: a live node's DRAM, else only a live node's SSD (a get
/// promotes it first), else nowhere (unknown, not complete, or on no live node).
enum class availability { dram, ssd, none };
availability available(const master_state& st, const storage::object_record* r);

/// Counts blocks that lost their last replica (to a node's loss, a bad or missing copy).
void count_lost(master_state& st, const std::vector<storage::object_record>& gone);
/// Takes `owner` as node `node`'s owner: watched from now on, the node alive.
void adopt_owner(master_ptr self, uint32_t node, block_owner_actor owner);
caf::result<typed_envelope<wire::PoolPeers>> on_peers(master_ptr self);
/// Asks the owners to free these blocks' replicas (fire and forget: a lost free leaks space
/// until the owner next reports).
void free_replicas(master_ptr self, const std::vector<storage::object_record>& records);
/// Tells the owners that these blocks were used, in this order: one Touch per owner (split at
/// owner_batch_max keys) naming its DRAM replicas among them, so that their eviction order
/// follows reads they never see. Fire and forget: a lost touch only ages a block early.
void touch_replicas(master_ptr self, const std::vector<block_key>& keys);

} // namespace crescent
