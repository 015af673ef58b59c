// State of a prefill worker, and its handlers split across files by concern: admission
// (admit.cpp), the compute loop (compute.cpp), the KV hand-off to decode (handoff.cpp) and the
// pool (pool_io.cpp).
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/prefill_worker/prefill_worker.hpp"
#include "actors/request/request_actor.hpp"
#include "transport/region_handle.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace crescent {

/// One cached block being loaded into the job's pages: its replicas, nearest first, tried in
/// turn until one reads and verifies.
struct block_load {
  uint64_t key = 0;
  uint64_t checksum = 0;
  std::vector<transport::region_handle> replicas;
  uint32_t next = 0; // the replica the next read tries
  bool verified = false;
  bool remote = false;   // verified from another node's replica
  caf::error last_error; // of the last replica tried, if it failed
};

/// A batch of replica writes in flight: the granted blocks and which writes carry each.
struct block_store {
  std::vector<uint64_t> keys;           // granted blocks
  std::vector<size_t> blocks;           // their indices in the prompt
  std::vector<uint64_t> nodes;          // a mask of the nodes holding each one's replicas
  std::vector<std::vector<size_t>> ops; // per block: indices of its replica writes in the batch
  std::vector<uint64_t> revoke;         // granted blocks that could not even be written
  bool replicate = false; // copies of pulled blocks (committed as replicas), not new blocks
};

/// Stored blocks: their keys and, per key, a mask of the nodes holding them.
struct stored_blocks {
  std::vector<uint64_t> keys;
  std::vector<uint64_t> nodes;
};

struct prefill_job {
  uint64_t request_id = 0;
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> keys; // chained keys of the blocks, a partial last one included
  uint32_t decode_instance = 0;
  std::vector<transport::region_handle> decode_pages;
  bool pull = false; // cached blocks may come from other nodes (and are then stored here)
  request_actor requester;
  // Progress, filled while the job runs.
  std::vector<transport::region_handle> pages; // local KV pages
  std::vector<std::byte*> page_ptrs;
  std::vector<block_load> loads;      // the cached prefix, while it loads
  std::vector<size_t> loading;        // indices into loads of the reads in flight
  std::optional<block_store> storing; // the new blocks' writes in flight
  std::vector<size_t> pulled;         // reused blocks read from other nodes: copied here last
  stored_blocks stored;               // committed new blocks, kept while the copies are made
  uint32_t reused_blocks = 0;
  uint32_t reused_tokens = 0; // of the prompt, from the pool (at most all but its last token)
  uint32_t remote_reused_tokens = 0; // of those, read from other nodes
  uint32_t position = 0;             // tokens whose KV is in the local pages
  uint32_t computed_tokens = 0;
  uint32_t load_misses = 0;
  int64_t load_started_ns = 0;  // the first read of the cached prefix
  uint32_t pulled_blocks = 0;   // of it, read from other nodes
  uint64_t pull_ns = 0;         // the loads' time, when some were pulled
  uint64_t pull_modeled_ns = 0; // of their reads from other nodes, in simulated time
  uint32_t pulled_from = 0;     // the node of the first pulled block
  uint64_t compute_ns = 0;
  uint32_t first_token = 0;
  bool computed = false;        // every token computed; hand-off is next
  bool signalling = false;      // KV written, kv_ready sent to the decode worker, no answer yet
  bool signalled = false;       // kv_ready was sent (once)
  bool awaiting_store = false;  // handed off, waiting for the store slot
  int64_t store_started_ns = 0; // when it left the compute slot for the store slot
  int64_t accepted_ns = 0;      // queued
  int64_t started_ns = 0;       // became the current job
  // The hand-off (handoff.cpp): batches of writes into the decode pages. Streamed, a chunk is
  // computed a range of layers a step, and each range's KV goes out while the next computes.
  bool streaming = false;
  uint32_t layer = 0;            // the next layer of the current chunk to compute
  gpu::layer_range unsent{};     // computed, not submitted yet (count() 0: none)
  uint32_t unsent_pages_end = 0; // the pages those layers wrote that may go (complete ones)
  uint32_t pages_sent = 0;       // pages before it have every layer submitted
  std::vector<float> stream;     // the chunk's residual stream between ranges of layers
  uint32_t batches_in_flight = 0;
  bool all_sent = false;                   // every batch is submitted
  std::vector<int64_t> batch_submitted_ns; // per batch, on the actor's clock
  int64_t computed_ns = 0;                 // when the last range of the last chunk was computed
  int64_t last_end_ns = 0;                 // when the latest batch ended
  uint64_t kv_busy_ns = 0;                 // the time some batch was in flight
};

struct prefill_state {
  static inline const char* name = "prefill_worker";
  prefill_worker_options options;
  prefill_worker_parts parts;
  std::deque<prefill_job> queue;
  std::optional<prefill_job> current; // loading, computing, handing off
  std::optional<prefill_job> storing; // its KV with decode: storing new blocks, copying pulled
  bad_message_counter bad;
  uint64_t compute_ns_total = 0;
  uint64_t load_misses_total = 0;
};

using prefill_ptr = prefill_worker_actor::stateful_pointer<prefill_state>;

/// The actor's clock (CAF's virtual clock in simulated time), in nanoseconds.
inline int64_t clock_ns(prefill_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

// admit.cpp
caf::result<envelope> on_prefill_job(prefill_ptr self, const envelope& msg);
// compute.cpp
void start_next_job(prefill_ptr self);
void on_step(prefill_ptr self);
void begin_compute(prefill_ptr self);
void fail_job(prefill_ptr self, const std::string& reason);
void begin_store(prefill_ptr self);
void finish_store(prefill_ptr self, stored_blocks stored);
// pool_io.cpp
void lookup_prefix(prefill_ptr self);
void on_loaded(prefill_ptr self, uint64_t request_id, const std::vector<caf::error>& results,
               uint64_t remote_ns);
void store_new_blocks(prefill_ptr self);
void on_stored(prefill_ptr self, uint64_t request_id, const std::vector<caf::error>& results);
// handoff.cpp
void hand_off(prefill_ptr self);
void send_cached_prefix(prefill_ptr self);
void stream_computed(prefill_ptr self);
void end_streaming(prefill_ptr self);
void on_handed_off(prefill_ptr self, uint64_t request_id, uint32_t batch, const caf::error& err);

} // namespace crescent
