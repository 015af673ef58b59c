// State of a decode worker; reservations (reserve.cpp) and the batch loop (batch.cpp).
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/common/recent_ids.hpp"
#include "actors/decode_worker/decode_worker.hpp"
#include "actors/request/request_actor.hpp"
#include "transport/region_handle.hpp"

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace crescent {

struct reservation {
  uint64_t request_id = 0;
  request_actor requester;
  uint32_t prompt_tokens = 0;
  uint32_t max_new_tokens = 0;
  uint32_t prefill_instance = 0;                    // the one placed, whose kv_ready alone counts
  std::vector<transport::region_handle> pool_pages; // slots of the local pool
  std::vector<transport::region_handle> grants;     // per-page handles given out, until revoked
  std::vector<std::byte*> page_ptrs;
  bool active = false;     // KV arrived; in the batch
  uint32_t length = 0;     // tokens whose KV is in the pages
  uint32_t next_input = 0; // token fed at the next step
  uint32_t generated = 0;  // output tokens so far, the prefill's first token included
};

struct emitted_token {
  uint64_t request_id;
  uint32_t token;
  bool final;
  uint32_t index; // in the request's output (0: the prefill's first token)
};

struct decode_state {
  static inline const char* name = "decode_worker";
  decode_state() = default;
  decode_state(const decode_state&) = delete;
  decode_state& operator=(const decode_state&) = delete;
  /// An instance that stops (killed, or its node lost) revokes every page grant it gave out
  /// while its pages are still mapped: a prefill still sending KV then fails to address them
  /// (not_found) instead of writing into memory that is gone.
  ~decode_state();
  decode_worker_options options;
  decode_worker_parts parts;
  std::unordered_map<uint64_t, reservation> reservations;
  // Every request reserved for, ended or not: a request reserves once at an instance, so a
  // second ReserveRequest is a copy (a duplicate, or one held on the way). Taken after the first
  // reservation ended, it would make a reservation nobody releases until the request ends, and
  // a copy of the first KvReady would then start the request's decode again on pages that never
  // got its KV, whose tokens the request took (crescent chaos seed 60071 of
  // docs/chaos/heavier.budget.yaml).
  recent_ids reserved{decode_recent_reservations_max};
  // Reservations whose decode ran to the end: a copy of their kv_ready (the prefill worker sends
  // it again when the answer was lost) is answered as the first was, not as a stranger's.
  recent_ids decoded{decode_recent_reservations_max};
  std::vector<uint64_t> active;       // ids in join order
  size_t rotation = 0;                // where the next batch starts, when above batch_max
  std::vector<emitted_token> pending; // computed, emitted at the next step
  bool stepping = false;
  bad_message_counter bad;
  std::vector<std::byte> codec_scratch; // a page, for decoding the hand-off's blocks in place
  uint64_t codec_errors_total = 0;      // hand-offs whose blocks did not decode
  uint64_t compute_ns_total = 0;
};

using decode_ptr = decode_worker_actor::stateful_pointer<decode_state>;

// reserve.cpp
caf::result<typed_envelope<wire::ReserveReply>>
on_reserve(decode_ptr self, const typed_envelope<wire::ReserveRequest>& msg);
caf::result<void> on_release(decode_ptr self, const typed_envelope<wire::ReleaseRequest>& msg);
void drop_reservation(decode_ptr self, uint64_t request_id);
void revoke_grants(decode_ptr self, reservation& r);
// batch.cpp
caf::result<void> on_kv_ready(decode_ptr self, const typed_envelope<wire::KvReady>& msg);
void on_step(decode_ptr self);

} // namespace crescent
