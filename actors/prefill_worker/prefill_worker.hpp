// The prefill worker of one prefill instance.
//
// Jobs are computed one at a time, in arrival order: look up the longest cached prefix at the
// store master, read those blocks from the pool (verifying each checksum; a mismatch is a miss
// and the rest is recomputed), compute the remaining tokens in chunks, write the prompt's KV
// into the pages the decode worker reserved (streamed layer by layer, or after), signal the
// decode worker, report the first token to the request. Then the job stores the prompt's new
// full blocks in the pool while the next job loads and computes (one job stores at a time).
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/common/placement.hpp"
#include "actors/prefill_worker/prefill_worker_actor.hpp"
#include "gpu/block_codec.hpp"
#include "gpu/engine.hpp"
#include "storage/dram_pool.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>

namespace crescent {

/// A streaming job reads its cached prefix in up to this many batches, in prompt order, so
/// that its first pages go to decode while the rest load (pool_io.cpp).
inline constexpr uint32_t prefill_prefix_load_batches = 8;
/// A streaming job's cached prefix goes to decode in batches of at most
/// prefill_worker_options::load_batch_bytes_max, while fewer than this many of the job's
/// batches are in flight (handoff.cpp): two, so that the link never waits for the next.
inline constexpr uint32_t prefill_handoff_window = 2;
/// The blocks of pages of `page_bytes` that a load's batch of at most `batch_bytes_max` holds
/// (at least one; prefill_worker_options::load_batch_bytes_max).
inline uint64_t prefill_load_blocks_max(uint64_t page_bytes, uint64_t batch_bytes_max) {
  return std::max<uint64_t>(1, batch_bytes_max / std::max<uint64_t>(1, page_bytes));
}

/// Requests whose jobs a worker remembers, to refuse a second copy of one (recent_ids): the
/// last 16,384, some seconds of jobs at the most a worker takes.
inline constexpr size_t prefill_recent_jobs_max = 16384;
/// Cancels of jobs that have not come (yet) that a worker remembers, to refuse the job if it
/// comes after all (a job delayed past its request's timeout): the last 1,024.
inline constexpr size_t prefill_early_cancels_max = 1024;

struct prefill_worker_options {
  uint32_t instance = 0;
  uint32_t node = 0;
  uint32_t chunk_tokens = 128;
  uint32_t queue_jobs_max = 256;
  /// Advance CAF's clock by each chunk's compute time (simulated time) instead of spending it.
  bool simulated_time = false;
  /// How new blocks are stored in the pool.
  uint32_t replicas = 1;
  placement_policy placement = placement_policy::local_first;
  /// Blocks read from other nodes are copied to this node's pool after the job (pool_io.cpp).
  bool copy_pulled = true;
  /// Prompts of at least this many tokens stream their KV layer by layer (handoff.cpp).
  uint32_t stream_min_tokens = 1024;
  uint32_t stream_layers = 1; // per step, at most the model's
  /// The next job starts while this one stores its new blocks (false: after).
  bool overlap_store = true;
  /// Chunked pipeline parallelism: consecutive groups of this many instances share the model's
  /// layers (stage.cpp); the first of a group takes its jobs. 1: no groups.
  uint32_t group_instances = 1;
  /// At most this much KV in a batch of a load, and in flight at once when it reads from other
  /// nodes (pool_io.cpp, load_round); and in a batch of the cached prefix's hand-off
  /// (handoff.cpp). prefill_config::load_batch_bytes_max.
  uint64_t load_batch_bytes_max = uint64_t{256} << 20;
  /// A thread of its own (actors/common/spawn_placement.hpp): real time only.
  bool own_thread = false;
};

/// What a prefill worker works with. `kv_pages` must hold two of the longest prompt the model
/// allows: one job computes while the one before it stores its new blocks.
struct prefill_worker_parts {
  std::shared_ptr<gpu::engine> engine;
  std::shared_ptr<storage::dram_pool> kv_pages;
  std::shared_ptr<transport::transfer_engine> transfer;
  directory_ref dir;
  /// With group_instances > 1: registered memory for the streams between stages, two slots of
  /// engine->stream_bytes(chunk_tokens) per chunk of the longest prompt (an inbox and an outbox).
  std::shared_ptr<storage::dram_pool> streams;
  /// The pool's block codec (kv_codec): blocks are encoded into the storing job's pages before
  /// they are written and decoded in place after they are read (pool_io.cpp). Null: the
  /// engine's pages are stored as they are.
  std::shared_ptr<const gpu::block_codec> codec;
  /// With a codec that also compresses the hand-off (codec.handoff): registered memory where
  /// ranges of layers are encoded before they are written to decode, two slots of a page per
  /// page of the longest prompt (the job's, then a group stage's). Null: the hand-off writes
  /// the pages as they are.
  std::shared_ptr<storage::dram_pool> staging;
};

prefill_worker_actor spawn_prefill_worker(caf::actor_system& sys, prefill_worker_options options,
                                          prefill_worker_parts parts);

} // namespace crescent
