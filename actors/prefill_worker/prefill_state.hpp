// State of a prefill worker, and its handlers split across files by concern: admission
// (admit.cpp), the compute loop (compute.cpp), the KV hand-off to decode (handoff.cpp) and the
// pool (pool_io.cpp).
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/common/node_set.hpp"
#include "actors/common/recent_ids.hpp"
#include "actors/prefill_worker/prefill_worker.hpp"
#include "actors/request/request_actor.hpp"
#include "actors/store_master/pool_batches.hpp"
#include "messages/schema/common.capnp.h"
#include "transport/region_handle.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace crescent {

/// A batch of replica writes in flight: the granted blocks, in the order they were added to
/// the writes.
struct block_store {
  std::vector<block_key> keys; // granted blocks
  std::vector<size_t> blocks;  // their indices in the prompt
  std::vector<node_set> nodes; // the nodes holding each one's replicas
  std::vector<size_t> bytes;   // per block: its stored bytes (encoded, with a codec)
  pool_batches::replica_writes writes;
  std::vector<block_key> revoke; // granted blocks that could not even be written
  bool replicate = false;        // copies of pulled blocks (committed as replicas), not new blocks
};

/// Stored blocks: their keys and, per key, the nodes holding them.
struct stored_blocks {
  std::vector<block_key> keys;
  std::vector<node_set> nodes;
};

/// Streams going to the next stage of a prefill group (CPP, stage.cpp): chunk c's is copied to
/// outbox slot c once its last layer here is computed, and written into the next stage's inbox
/// slot c once that stage has said where its inbox is.
struct stream_out {
  std::vector<transport::region_handle> inbox; // the next stage's slots (empty: not known yet)
  std::vector<uint32_t> waiting;               // chunks in the outbox, not written yet
  uint32_t in_flight = 0;                      // writes
};

/// A stage's part of a group job: every stage of a group but the head runs one at a time.
struct stage_job {
  uint64_t request_id = 0;
  std::vector<uint32_t> tokens;
  uint32_t cached_tokens = 0; // the prefix the head loaded: read from its pages
  uint32_t decode_instance = 0;
  std::vector<transport::region_handle> head_pages;
  std::vector<transport::region_handle> decode_pages;
  std::vector<transport::region_handle> pages; // local: this stage's layers only
  std::vector<std::byte*> page_ptrs;
  std::vector<bool> arrived; // per chunk: its stream is in the inbox
  uint32_t chunks = 0;
  uint32_t chunk = 0;    // the next to compute
  uint32_t position = 0; // its first token
  uint32_t layer = 0;    // the next layer of it to compute
  gpu::layer_range unsent{};
  uint32_t unsent_pages_end = 0;
  uint32_t pages_sent = 0;
  std::vector<float> stream;
  stream_out out;
  bool loaded = false;    // the prefix's layers are in the local pages
  bool stepping = false;  // a step is due: what it computed goes out then
  uint32_t in_flight = 0; // the prefix read and KV batches
  caf::error failure;     // set: stop, and say so once nothing is in flight
  uint32_t first_token = 0;
  uint64_t compute_ns = 0;
  int64_t computed_ns = 0; // when its last chunk was computed
  int64_t heard_ns = 0;    // when it last heard of the job: its acceptance, a chunk's arrival
  bool watch = false;      // its quiet watch (stage_job_quiet_timeout) is armed
};

struct prefill_job {
  uint64_t request_id = 0;
  std::vector<uint32_t> tokens;
  std::vector<block_key> keys; // chained keys of the blocks, a partial last one included
  uint32_t decode_instance = 0;
  std::vector<transport::region_handle> decode_pages;
  bool pull = false; // cached blocks may come from other nodes (and are then stored here)
  wire::KvSend kv_send = wire::KvSend::CONFIG; // CONFIG: by options.stream_min_tokens
  request_actor requester;
  // Progress, filled while the job runs.
  std::vector<transport::region_handle> pages; // local KV pages
  std::vector<std::byte*> page_ptrs;
  std::optional<pool_batches::replica_reads> loads; // the cached prefix, while it loads
  // The current round of reads, batch by batch: a streaming job reads in several batches, so
  // that its pages go to decode as they land; at most load_window of them are in flight at once,
  // so that a load holds a node's links for a bounded time (pool_io.cpp, load_round).
  struct load_batch {
    std::vector<size_t> blocks;              // what it reads (emptied when it ends)
    std::vector<transport::transfer_op> ops; // its reads (emptied when it is submitted)
    int64_t submitted_ns = 0;
  };
  std::vector<load_batch> loading;
  uint32_t next_load = 0;   // the next batch of `loading` to submit
  uint32_t load_window = 1; // batches in flight at once
  int64_t round_started_ns = 0;
  uint64_t round_remote_ns = 0; // the round's start to the end of its last read from another node
  std::optional<block_store> storing; // the new blocks' writes in flight
  std::vector<size_t> pulled;         // copied here last: reused blocks read from other nodes, and
                                      // computed ones the pool holds only on SSD
  stored_blocks stored;               // committed new blocks, kept while the copies are made
  // Reused blocks the store master read back from an SSD tier for this job, with the node whose
  // DRAM holds them again now (the one read from): the report tells the conductor.
  stored_blocks read_back;
  uint32_t reused_blocks = 0;
  uint32_t reused_tokens = 0; // of the prompt, from the pool (at most all but its last token)
  uint32_t remote_reused_tokens = 0; // of those, read from other nodes' DRAM (not from SSD)
  uint32_t ssd_reused_tokens = 0;    // of those, read back from an SSD tier (on any node)
  uint32_t position = 0;             // tokens whose KV is in the local pages
  uint32_t computed_tokens = 0;
  uint32_t load_misses = 0;
  int64_t load_started_ns = 0;        // the first read of the cached prefix
  uint32_t pulled_blocks = 0;         // of it, read from other nodes
  uint64_t pull_ns = 0;               // the loads' time, when some were pulled
  uint64_t pull_modeled_ns = 0;       // of their reads from other nodes, in simulated time
  std::vector<uint32_t> pulled_nodes; // every node pulled from, once, in order of first block
  uint64_t compute_ns = 0;
  uint32_t first_token = 0;
  bool computed = false;        // every token computed; hand-off is next
  bool cancelled = false;       // its request ended: it stops once nothing of it is in flight
  bool step_due = false;        // a step_atom for it is on its way
  uint32_t loads_in_flight = 0; // batches of reads into its pages on their way (loaded_atom)
  std::string failure;          // with cancelled: why it fails, once nothing is in flight
  bool signalling = false;      // KV written, kv_ready sent to the decode worker, no answer yet
  bool signalled = false;       // kv_ready was sent (once)
  bool stage_watch = false;     // a group head's watch on its stages is armed (stage.cpp)
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
  uint32_t pages_sent = 0;       // pages before it have every layer submitted or queued
  // The cached prefix's pages queued to go, [prefix_next, prefix_end): they go in batches of at
  // most options.load_batch_bytes_max, prefill_handoff_window of the job's batches in flight.
  uint32_t prefix_next = 0;
  uint32_t prefix_end = 0;
  std::vector<float> stream; // the chunk's residual stream between ranges of layers
  uint32_t batches_in_flight = 0;
  bool all_sent = false;                   // every batch is submitted
  std::vector<int64_t> batch_submitted_ns; // per batch, on the actor's clock
  int64_t computed_ns = 0;                 // when the last range of the last chunk was computed
  int64_t last_end_ns = 0;                 // when the latest batch ended
  uint64_t kv_busy_ns = 0;                 // the time some batch was in flight
  // A group job (CPP, stage.cpp): this worker computes stage 0; the others are asked to.
  bool grouped = false;
  uint32_t chunk = 0;                  // the index of the chunk at position
  std::vector<uint8_t> stage_state;    // per stage: stage_waiting, stage_ok or stage_ended
  uint32_t forward_chunk = UINT32_MAX; // computed here, its stream not handed on yet
  stream_out out;
  int64_t compute_started_ns = 0;
  std::vector<uint64_t> stage_compute_ns; // per stage, its busy time (stage 0: this one's)
  uint64_t last_stage_tail_ns = 0;        // the last stage's KV tail, not part of the compute
};

/// A stage of a group job, as its head sees it.
inline constexpr uint8_t stage_waiting = 0; // asked, not finished
inline constexpr uint8_t stage_ok = 1;      // finished its part
inline constexpr uint8_t stage_ended = 2;   // failed, refused, aborted or gone: writes nothing

struct prefill_state {
  static inline const char* name = "prefill_worker";
  prefill_worker_options options;
  prefill_worker_parts parts;
  std::deque<prefill_job> queue;
  std::optional<prefill_job> current; // loading, computing, handing off
  std::optional<prefill_job> storing; // its KV with decode: storing new blocks, copying pulled
  // A group job that failed while other stages may still write into its pages: they are freed,
  // and the next job starts, once every stage has answered its abort.
  std::optional<prefill_job> draining;
  std::optional<stage_job> stage; // a stage other than the head: its part of a group job
  // A StageInbox that came before its StageJob (the next stage was asked first).
  std::optional<std::pair<uint64_t, std::vector<transport::region_handle>>> early_inbox;
  // Stream slots (group_instances > 1): inbox slot c is stream_slots[c], outbox slot c is
  // stream_slots[chunks_max + c].
  std::vector<transport::region_handle> stream_slots;
  std::vector<std::byte*> stream_ptrs;
  uint32_t chunks_max = 0;
  bad_message_counter bad;
  // The requests of the last jobs taken: a second copy of a PrefillJob (a message delivered
  // twice) is refused, not run again after the first handed its KV off.
  recent_ids recent_jobs{prefill_recent_jobs_max};
  // Cancels that came before their jobs, with who sent each: such a job, if it comes after all
  // and its requester (or the conductor) sent the cancel, is refused rather than run in vain.
  // The oldest go first past prefill_early_cancels_max.
  struct early_cancel {
    uint64_t request_id = 0;
    caf::actor_addr from;
  };
  std::deque<early_cancel> early_cancels;
  std::vector<std::byte> codec_scratch; // a page: what is encoded or decoded in place goes here
  // The hand-off's staging (parts.staging): slot i for page i of the current job, slot
  // staging_pages + i for page i of a group stage's job.
  std::vector<transport::region_handle> staging_slots;
  std::vector<std::byte*> staging_ptrs;
  uint32_t staging_pages = 0;
  uint64_t codec_errors_total = 0; // blocks a codec could not encode or decode
  uint64_t compute_ns_total = 0;
  uint64_t load_misses_total = 0;
};

using prefill_ptr = prefill_worker_actor::stateful_pointer<prefill_state>;

/// What the last step computed and has not been sent: layers `range` of pages [first, end).
struct unsent_kv {
  gpu::layer_range range{};
  uint32_t first = 0;
  uint32_t end = 0;
  bool empty() const { return range.count() == 0 || end <= first; }
};

/// Takes a job's unsent KV (a prefill_job or a stage_job): once a chunk's pages have every
/// layer up to `stage_end`, the pages after them are the next to send.
template <class Job>
unsent_kv take_unsent(Job& job, uint32_t stage_end) {
  unsent_kv out{job.unsent, job.pages_sent, job.unsent_pages_end};
  if (out.range.count() == 0)
    return out;
  job.unsent = {};
  if (out.range.end == stage_end)
    job.pages_sent = out.end;
  return out;
}

/// Page `index` of a prompt of `prompt_tokens` tokens, as a codec sees it: its valid tokens, and
/// whether it is the prompt's last (the pool's blocks and the hand-off's are encoded so).
struct page_extent {
  uint32_t tokens = 0;
  bool last = false;
};
inline page_extent extent_of(uint32_t index, uint32_t prompt_tokens, uint32_t block_tokens) {
  return {std::min(block_tokens, prompt_tokens - index * block_tokens),
          index + 1 == (prompt_tokens + block_tokens - 1) / block_tokens};
}

/// The memory behind each of `slots` of `pool`, appended to `out`.
caf::error map_slots(storage::dram_pool& pool, const std::vector<transport::region_handle>& slots,
                     std::vector<std::byte*>& out);
/// already_exists if this worker took a job of `request_id` among its last ones (recent_jobs):
/// a second copy of a message, which it refuses without counting it as bad input (a copy is the
/// network's doing, not the sender's). `role`: "instance" or "stage", for the reason.
caf::error refuse_if_taken(const prefill_state& st, uint64_t request_id, const char* role);
/// Stops the current job for a request that ended (its cancel came, or its actor is gone),
/// unless its KV is with decode already: then it goes on to store its blocks.
void cancel_current_job(prefill_ptr self);
/// A cancel of a job this worker has not taken (yet): remembered (early_cancels), with its
/// sender, in case the job comes after all.
void remember_early_cancel(prefill_state& st, uint64_t request_id, caf::actor_addr from);
/// cancelled if the job of `request_id` from `requester` was cancelled before it came, by that
/// requester or the conductor: refused rather than run for a request that moved on.
caf::error refuse_if_cancelled(prefill_ptr self, uint64_t request_id,
                               const caf::actor_addr& requester);
/// The checks every job takes, a group stage's too: token ids in the vocabulary, a decode
/// instance that exists, pages of one KV page each.
caf::error check_prompt(const prefill_state& st, const std::vector<uint32_t>& tokens,
                        uint32_t decode_instance,
                        const std::vector<transport::region_handle>& pages);

/// The actor's clock (CAF's virtual clock in simulated time), in nanoseconds.
inline int64_t clock_ns(prefill_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

// admit.cpp
caf::result<typed_envelope<wire::PrefillAccepted>>
on_prefill_job(prefill_ptr self, const typed_envelope<wire::PrefillJob>& msg);
void on_cancel_job(prefill_ptr self, const typed_envelope<wire::ReleaseRequest>& msg);
// compute.cpp
void start_next_job(prefill_ptr self);
void on_step(prefill_ptr self);
void begin_compute(prefill_ptr self);
void fail_job(prefill_ptr self, const std::string& reason);
/// Whether the current job is cancelled; it ends here (fail_job) when nothing that uses its pages
/// is in flight (no step due, no load or KV batch), else where the last of those comes back.
bool end_if_cancelled(prefill_ptr self);
void begin_store(prefill_ptr self);
void finish_store(prefill_ptr self, stored_blocks stored);
// pool_io.cpp
void lookup_prefix(prefill_ptr self);
void on_loaded(prefill_ptr self, uint64_t request_id, uint32_t batch,
               const std::vector<caf::error>& results, uint64_t remote_ns);
void store_new_blocks(prefill_ptr self);
void on_stored(prefill_ptr self, uint64_t request_id, const std::vector<caf::error>& results);
// stage.cpp: chunked pipeline parallelism
/// The group's geometry: this worker's stage, its head, and the layers a stage holds.
uint32_t stage_index(const prefill_state& st);
uint32_t group_head(const prefill_state& st);
gpu::layer_range stage_layers(const prefill_state& st, uint32_t stage);
caf::error make_stream_slots(prefill_ptr self);
void start_stages(prefill_ptr self); // head: asks the other stages (begin_compute)
void forward_stream(prefill_ptr self, stream_out& out, uint64_t request_id, uint32_t chunk,
                    std::span<const float> stream);
bool stages_finished(const prefill_job& job); // every other stage answered ok
/// Head, its own part ended: a stage that has not said it is done within stage_quiet_timeout
/// fails the job (its StageDone lost, say), rather than hold the group's queue for good.
void watch_stages(prefill_ptr self, prefill_job& job);
void on_stage_watch(prefill_ptr self, uint64_t request_id);
/// Head, failing `job`: sends each stage still running it a StageAbort (again, when the watch
/// finds one unanswered). False when no stage runs it and no stream of it is in flight.
bool abort_stages(prefill_ptr self, const prefill_job& job);
caf::result<typed_envelope<wire::StageAccepted>>
on_stage_job(prefill_ptr self, const typed_envelope<wire::StageJob>& msg);
void on_stage_inbox(prefill_ptr self, const typed_envelope<wire::StageInbox>& msg);
void on_stage_chunk(prefill_ptr self, const typed_envelope<wire::StageChunk>& msg);
void on_stage_done(prefill_ptr self, const typed_envelope<wire::StageDone>& msg);
void on_stage_abort(prefill_ptr self, const typed_envelope<wire::StageAbort>& msg);
void on_stage_io(prefill_ptr self, uint64_t request_id, uint32_t kind, uint32_t index,
                 const caf::error& err);
void on_stage_step(prefill_ptr self);
void on_stage_peer_down(prefill_ptr self, const caf::actor_addr& who, const caf::error& reason);
// handoff.cpp
caf::error make_staging_slots(prefill_ptr self);
/// The write of layers `r` of local page `index` (at `page`) of a prompt of `prompt_tokens`
/// tokens into `remote`, its page at the decode worker: encoded into `staging` (a page's bytes,
/// or null) first when the cluster's codec compresses the hand-off, else as it is. Checked end
/// to end (an xxh3 at the decode side) either way.
caf::expected<transport::transfer_op> kv_write(prefill_ptr self, std::byte* page,
                                               std::byte* staging,
                                               const transport::region_handle& remote,
                                               gpu::layer_range r, uint32_t index,
                                               uint32_t prompt_tokens);
void signal_decode_when_ready(prefill_ptr self);
void hand_off(prefill_ptr self);
/// Whether the current job streams its KV (decided before its prefix loads).
bool streams(const prefill_state& st, const prefill_job& job);

/// The pages a batch of the cached prefix holds at most, read (pool_io.cpp) or handed off
/// (handoff.cpp): options.load_batch_bytes_max of KV, at least one page.
inline uint64_t prefix_batch_pages_max(const prefill_state& st) {
  return prefill_load_blocks_max(st.parts.engine->config().page_bytes(),
                                 st.options.load_batch_bytes_max);
}
/// Sends the whole pages of the cached prefix that are loaded and not sent (streaming jobs):
/// the first `verified` pages are in the local pages, verified.
void send_cached_prefix(prefill_ptr self, uint32_t verified);
/// Fails the current job now, or once no read into its pages and no step of its is in flight
/// (the pages are then freed, and must not be written after; a step that came after its job
/// would run the next one's).
void fail_when_idle(prefill_ptr self, const std::string& reason);
void stream_computed(prefill_ptr self);
void end_streaming(prefill_ptr self);
void on_handed_off(prefill_ptr self, uint64_t request_id, uint32_t batch, const caf::error& err);

} // namespace crescent
