// State of a request actor: the life of one request (lifecycle.cpp) and its progress
// (progress.cpp).
#pragma once

#include "actors/common/handler_guard.hpp"
#include "actors/request/request.hpp"

#include <caf/typed_response_promise.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace crescent {

enum class request_status { completed, rejected, failed };

struct request_state {
  static inline const char* name = "request";
  bad_message_counter bad;
  request_options options;
  directory_ref dir;
  caf::typed_response_promise<typed_envelope<wire::RequestOutcome>> client;
  caf::actor_addr client_addr; // who ran it: only it may cancel
  token_listener listener;     // streamed: hears each token as it comes (none: not streamed)
  bool running = false;
  bool done = false;
  // The request.
  uint64_t client_id = 0;       // the client's id
  uint64_t id = 0;              // the current attempt's: client_id | attempt << attempt_id_shift
  std::vector<uint32_t> tokens; // the current attempt's prompt: the client's, or it and the output
  std::vector<block_key> keys;  // their chained block keys
  uint32_t prompt_tokens = 0;   // the client's prompt: the first of `tokens`
  uint32_t max_new_tokens = 0;
  // Its attempts: one, and as many more as request_retries_max allows after failures that were
  // not its own. Each gets a placement that avoids the instances that failed the one before.
  uint32_t attempt = 0;
  std::vector<uint32_t> avoid_prefill;
  std::vector<uint32_t> avoid_decode;
  std::string retry_reason; // why the last attempt failed
  // The output the client had before the current attempt, which continues after it (it takes
  // the prompt and that output as its prompt); 0: the attempt makes the first token.
  uint32_t resumed_at = 0;
  // Its life (the current attempt's).
  bool placed = false;
  bool reserved = false; // decode memory reserved, or a coupled instance took the job
  bool coupled = false;  // placed on a coupled instance: prefill_instance = decode_instance
  uint32_t prefill_instance = 0;
  uint32_t decode_instance = 0;
  uint32_t decode_tries = 0; // decode instances that refused the reservation for lack of memory
  bool pull = false;         // the prefill may pull cached blocks from other nodes
  wire::KvSend kv_send = wire::KvSend::CONFIG; // how its prefill sends KV to decode
  uint64_t predicted_ttft_ns = 0;              // the conductor's, at placement
  uint64_t retry_after_ms = 0;                 // rejected by the conductor: its estimate
  int64_t arrival_ns = 0;
  std::vector<uint32_t> output;
  std::vector<int64_t> token_times_ns;
  std::vector<uint32_t> early_tokens; // decode tokens that overtook the first token
  // Token batches that came before one sent ahead of them (a delay or a reconnect reordered
  // them), by the output index of their first token; each joins once the gap before it fills.
  struct later_batch {
    std::vector<uint32_t> tokens;
    bool final = false;
  };
  std::map<uint32_t, later_batch> later_batches;
  uint64_t duplicate_batches = 0; // batches (or parts) already had: dropped
  int64_t last_token_ns = 0;      // when the last token came (decode_quiet_timeout), or a
                                  // coupled instance took the job (coupled_quiet_timeout)
  bool quiet_watch = false;       // a quiet_atom is on its way
  bool first_token_seen = false;
  bool decode_heard = false; // a TokenBatch came: the decode worker has the KV
  bool final_seen = false;
  uint32_t computed_tokens = 0;
  uint32_t reused_tokens = 0;
  uint32_t remote_reused_tokens = 0;
  uint32_t ssd_reused_tokens = 0;
  uint32_t load_misses = 0;
  uint64_t prefill_compute_ns = 0;
  uint64_t kv_tail_ns = 0;                // the KV's arrival at decode after compute ended
  uint64_t kv_busy_ns = 0;                // the time some of the KV was in flight
  std::vector<uint64_t> stage_compute_ns; // a prefill group's: each stage's busy time
  uint64_t prefill_queue_ns = 0;
  std::vector<uint32_t> pulled_from; // the other nodes its reused blocks were read from
};

using request_ptr = request_actor::stateful_pointer<request_state>;

// lifecycle.cpp
/// Asks the conductor to place the request's current attempt (avoiding the instances that
/// failed the one before, if any).
void schedule(request_ptr self);
caf::result<typed_envelope<wire::RequestOutcome>>
on_run(request_ptr self, const typed_envelope<wire::RequestSpec>& msg);
caf::result<typed_envelope<wire::RequestOutcome>>
on_stream(request_ptr self, const typed_envelope<wire::RequestSpec>& msg, caf::actor listener);
void on_cancel(request_ptr self);
void finish(request_ptr self, request_status status, const std::string& reason);
/// Lets go of what the current attempt holds: its decode reservation (unless it completed) and
/// its place in the conductor's count.
void end_attempt(request_ptr self, request_status status);
/// Which of an attempt's instances failed it, as far as the request can tell: the next attempt's
/// placement avoids that one (a coupled instance is its prefill), or both where it cannot tell.
enum class failed_part { prefill, decode, either };
/// The current attempt failed for a reason not the request's own: it is placed again while
/// request_retries_max allows (continuing its output past the first token), else it ends with
/// `status` and the reason. With every token in (only the final flag lost) it completes.
void fail_or_retry(request_ptr self, failed_part part, request_status status,
                   const std::string& reason);
/// The tokens the current attempt is to make: those asked for, less what earlier ones made.
inline uint32_t attempt_max_new(const request_state& st) {
  return st.max_new_tokens - st.resumed_at;
}
/// Whether `id` is one of this request's earlier attempts: what their workers still send is
/// dropped without a word.
bool earlier_attempt(const request_state& st, uint64_t id);
// progress.cpp
caf::result<void> on_prefill_done(request_ptr self, const typed_envelope<wire::PrefillDone>& msg);
caf::result<void> on_tokens(request_ptr self, const typed_envelope<wire::TokenBatch>& msg);
/// A token came, or a coupled instance took the job: the quiet watch starts again from now.
void heard_from_worker(request_ptr self);
void on_quiet(request_ptr self);
caf::result<void> on_failed(request_ptr self, const typed_envelope<wire::RequestFailed>& msg);
int64_t now_ns(request_ptr self);
/// Whether the prefill instance still owes this request something (its first token, or the
/// kv_ready that lets decode start): until then its end fails the request.
bool prefill_owes(const request_state& st);

} // namespace crescent
