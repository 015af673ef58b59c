// State of a coupled worker; job intake and release (intake.cpp) and the step loop (step.cpp).
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/common/recent_ids.hpp"
#include "actors/coupled_worker/coupled_worker.hpp"
#include "actors/coupled_worker/page_cache.hpp"
#include "actors/request/request_actor.hpp"
#include "transport/region_handle.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <unordered_map>
#include <vector>

namespace crescent {

/// One request at the instance: waiting for pages, then prefilling, then decoding.
struct coupled_seq {
  uint64_t request_id = 0;
  request_actor requester;
  std::vector<uint32_t> tokens; // the prompt
  std::vector<block_key> keys;  // its blocks' chained keys (the last may be partial)
  uint32_t max_new_tokens = 0;
  int64_t accepted_ns = 0;
  // Once admitted:
  std::vector<uint32_t> pages; // page_cache numbers, in token order
  std::vector<std::byte*> page_ptrs;
  uint32_t reused_tokens = 0; // the shared prefix
  uint32_t length = 0;        // tokens whose KV is in the pages
  uint32_t prefill_steps = 0; // steps that computed part of the prompt
  int64_t prefill_start_ns = 0;
  uint64_t prefill_ns = 0; // the steps that computed part of its prompt
  uint32_t next_input = 0; // decoding: the token fed at the next step
  uint32_t generated = 0;  // output tokens so far, the first included
  uint32_t sent = 0;       // of them, those sent to the request (JobProbeReply)
  bool prefilled = false;
};

/// What a step computed that is emitted at the next one.
struct coupled_emit {
  uint64_t request_id = 0;
  uint32_t token = 0;
  bool first = false; // the prompt's first token (PrefillDone), else a decoded one
  bool final = false;
  uint32_t index = 0; // in the request's output (0: the first token)
};

struct coupled_state {
  static inline const char* name = "coupled_worker";
  coupled_worker_options options;
  coupled_worker_parts parts;
  std::unique_ptr<page_cache> cache;
  std::vector<transport::region_handle> page_slots; // every KV page, taken from the pool once
  std::vector<std::byte*> page_memory;              // by page_cache number
  std::deque<coupled_seq> waiting;
  std::unordered_map<uint64_t, coupled_seq> running;
  // Every request whose job was taken, ended or not: a request sends its job once, so another
  // is a copy (a duplicate, or one held on the way), which would compute the request again.
  recent_ids taken{coupled_recent_jobs_max};
  std::deque<uint64_t> prefilling; // admitted, prompt not all computed: in arrival order
  std::vector<uint64_t> decoding;  // in join order
  size_t rotation = 0;             // where the next decode batch starts, above batch_max
  std::vector<coupled_emit> pending;
  bool stepping = false;
  bad_message_counter bad;
  uint64_t compute_ns_total = 0;
};

using coupled_ptr = coupled_worker_actor::stateful_pointer<coupled_state>;

inline int64_t clock_ns(coupled_ptr self) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             self->clock().now().time_since_epoch())
      .count();
}

// intake.cpp
caf::result<typed_envelope<wire::PrefillAccepted>>
on_coupled_job(coupled_ptr self, const typed_envelope<wire::CoupledJob>& msg);
caf::result<void> on_release(coupled_ptr self, const typed_envelope<wire::ReleaseRequest>& msg);
caf::result<typed_envelope<wire::JobProbeReply>>
on_probe(coupled_ptr self, const typed_envelope<wire::JobProbe>& msg);
typed_envelope<wire::WorkerStats> make_stats(coupled_ptr self);
/// Drops a request at any stage; its pages go back (cached ones stay cached). The caller wakes
/// the step loop if it is not in a step (waiting requests may fit now).
void drop_request(coupled_ptr self, uint64_t request_id);
/// Fails a request with `reason` (told to its requester) and drops it.
void fail_request(coupled_ptr self, uint64_t request_id, const std::string& reason);
/// Queues the next step unless one is due.
void wake(coupled_ptr self, uint64_t after_ns = 0);
// step.cpp
void on_step(coupled_ptr self);

} // namespace crescent
