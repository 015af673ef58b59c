// The request actor: one per request. Given a RequestSpec it asks the conductor for a placement,
// reserves KV memory at the chosen decode instance, queues the prefill job, collects the first
// token and the decoded tokens with their times, and answers the client with a RequestOutcome:
// completed, rejected (with the conductor's reason) or failed (with the reason), never nothing.
// A request that is not done by its deadline fails, and its reservation is released.
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/request/request_actor.hpp"
#include "messages/block_key.hpp"
#include "messages/schema/common.capnp.h"

#include <caf/actor_system.hpp>

#include <memory>
#include <span>

namespace crescent {

struct request_options {
  uint32_t block_tokens = 16;
  uint32_t vocab = 256;
  uint32_t context_tokens_max = 8192;
  block_key root_key; // the model's key_root(): root of the block-key chain
  uint32_t default_deadline_ms = 300000;
  uint32_t retries_max = 0; // request_retries_max: attempts placed again after a failure
};

/// A request's attempts are told apart by the top byte of the id their messages carry: attempt
/// k of request r is r | k << 56, so a client's ids are below 2^56.
inline constexpr unsigned attempt_id_shift = 56;
inline constexpr uint64_t client_id_max = (uint64_t{1} << attempt_id_shift) - 1;

request_actor spawn_request_actor(caf::actor_system& sys, request_options options,
                                  directory_ref dir);

/// The RequestSpec a client sends with run_atom or stream_atom.
/// `kv_send`: how its prefill sends KV to decode (CONFIG: as the cluster file says).
typed_envelope<wire::RequestSpec> make_request_spec(uint64_t id, std::span<const uint32_t> prompt,
                                                    uint32_t max_new_tokens,
                                                    wire::KvSend kv_send = wire::KvSend::CONFIG);

} // namespace crescent
