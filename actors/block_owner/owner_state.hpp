// State of a block owner and its handlers, split by concern: space (space.cpp), eviction
// (evict.cpp), the actor itself (block_owner.cpp).
#pragma once

#include "actors/block_owner/block_owner.hpp"
#include "actors/common/handler_guard.hpp"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace crescent {

struct owned_block {
  uint64_t size_bytes = 0;
  std::optional<storage::arena_block> dram;
  bool on_ssd = false;
  bool evicting = false; // an eviction request for it is at the master
  bool freed = false;    // the master freed it while it was evicting
  // Refused as a victim (leased, pinned, pending): it steps aside until then, and each refusal
  // in a row doubles the wait, so that it cannot hold the head of the order.
  int64_t refused_until_ns = 0;
  uint32_t refusals = 0;
};

// A promotion whose answer waits for its modeled SSD reads (simulated time only).
struct waiting_promotion {
  caf::typed_response_promise<typed_envelope<wire::PromoteReply>> promise;
  typed_envelope<wire::PromoteReply> reply;
};

struct owner_state {
  static inline const char* name = "block_owner";
  block_owner_options options;
  block_owner_parts parts;
  std::unique_ptr<storage::eviction_index> order; // DRAM copies only
  std::unordered_map<block_key, owned_block> blocks;
  bool evicting = false;
  bool beating = false; // the heartbeat loop runs
  bad_message_counter bad;
  uint64_t evictions = 0;
  uint64_t eviction_refusals = 0;
  uint64_t offloads = 0;
  uint64_t promotions = 0;
  bool rejoining = false; // a report was refused as unavailable: said once, tried every beat
  uint64_t ssd_write_errors = 0;
  uint64_t ssd_read_errors = 0;
  std::string last_ssd_error; // at most ssd_error_text_max bytes
  std::unordered_map<uint64_t, waiting_promotion> promotions_waiting; // promotions_waiting_max
  uint64_t next_promotion = 0;
};

inline constexpr size_t ssd_error_text_max = 512;

using owner_ptr = block_owner_actor::stateful_pointer<owner_state>;

/// The actor system's clock (virtual in simulated time), in nanoseconds.
inline int64_t clock_ns(owner_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

// space.cpp
caf::result<typed_envelope<wire::AllocateReply>>
on_allocate(owner_ptr self, const typed_envelope<wire::Allocate>& msg);
caf::result<void> on_free(owner_ptr self, const typed_envelope<wire::FreeBlocks>& msg);
caf::result<typed_envelope<wire::PromoteReply>>
on_promote(owner_ptr self, const typed_envelope<wire::Promote>& msg);
/// Answers promotion `id`, whose modeled reads have ended (a message from itself only).
void on_promoted(owner_ptr self, uint64_t id);
/// A DRAM copy of `key`, read back from SSD if need be; `read_ns` grows to when, after now, that
/// read ends on the modeled drive (simulated time). io_error: the SSD copy was unreadable and is
/// forgotten; no_space: no DRAM room now; not_found: no copy.
caf::expected<transport::region_handle> promote(owner_ptr self, block_key key, uint64_t& read_ns);
void release_dram(owner_ptr self, block_key key, owned_block& b);
// evict.cpp
/// Counts and logs a failed SSD write (an offload) or read (a promotion); kept for the stats.
void note_ssd_error(owner_ptr self, bool write, block_key key, const caf::error& err);
void maybe_evict(owner_ptr self);
/// Moves the blocks a Touch names up the eviction order. Fire and forget: a refusal (not from
/// the master, malformed) is counted, never answered, since an error sent back to an actor
/// that did not ask for a reply ends it.
void on_touch(owner_ptr self, const typed_envelope<wire::Touch>& msg);
caf::result<typed_envelope<wire::VerifyReply>>
on_verify(owner_ptr self, const typed_envelope<wire::VerifyBlock>& msg);

} // namespace crescent
