// The decode worker of one decode instance.
//
// Memory: a request reserves KV pages for its whole life (prompt + output, bounded by a per-
// request budget) before its prefill starts. Each reserved page is registered with the transfer
// engine under a fresh access key and only that handle is handed out; when the KV arrives, or
// the reservation is released, the registration is revoked, so a late writer fails instead of
// writing into pages that belong to someone else by then.
//
// Decoding: a continuous batch. Every step emits the tokens of the previous step, then computes
// one token for up to batch_max active requests; requests join and leave between steps.
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/decode_worker/decode_worker_actor.hpp"
#include "gpu/block_codec.hpp"
#include "gpu/engine.hpp"
#include "storage/dram_pool.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system.hpp>

#include <memory>

namespace crescent {

/// Requests a worker remembers having reserved for, to refuse a second copy of a reservation
/// (recent_ids): the last 16,384, more than a worker's pages hold at once by far.
inline constexpr size_t decode_recent_reservations_max = 16384;

struct decode_worker_options {
  uint32_t instance = 0;
  uint32_t node = 0;
  uint32_t batch_max = 64;
  uint32_t request_tokens_max = 8192; // prompt + output of one request
  bool simulated_time = false;
  /// A thread of its own (actors/common/spawn_placement.hpp): real time only.
  bool own_thread = false;
};

struct decode_worker_parts {
  std::shared_ptr<gpu::engine> engine;
  std::shared_ptr<storage::dram_pool> kv_pages;
  std::shared_ptr<transport::transfer_engine> transfer;
  directory_ref dir;
  /// The cluster's codec when it compresses the hand-off (codec.handoff): the KV arrives as
  /// blocks of ranges of layers, decoded in place into the pages when kv_ready says all of it
  /// is there. Null: pages arrive as they are.
  std::shared_ptr<const gpu::block_codec> codec;
};

decode_worker_actor spawn_decode_worker(caf::actor_system& sys, decode_worker_options options,
                                        decode_worker_parts parts);

} // namespace crescent
