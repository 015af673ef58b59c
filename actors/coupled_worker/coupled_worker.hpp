// The coupled worker of one coupled instance: prefill and decode on one engine, in one
// continuous batch, as vLLM 0.5 ran them (the Mooncake paper's baseline; docs/coupled.md).
//
// Memory: the instance's KV pages (its GPU memory beside the weights). A request waits in a
// first-come-first-served queue until pages for its whole life (prompt and output) are free,
// then holds them until its last token: no preemption, as every admitted request has all the
// room it will need. With prefix caching, whole prompt blocks stay cached in those pages after
// their request ends (page_cache.hpp) and a later prompt with the same prefix shares them.
//
// Steps: each step first emits the tokens the step before computed, then computes one of
//   - prefill first (chunked_prefill false, vLLM's default then): while any admitted prompt is
//     not prefilled, a step prefills whole prompts, first come first, up to
//     token_budget new tokens (at least one prompt, whatever its size), and the decodes wait;
//     otherwise a step decodes one token for up to batch_max requests;
//   - chunked prefill: a step decodes one token for every running request (up to batch_max),
//     and fills what is left of token_budget with prompt chunks, first come first.
// A step's time is what its engine calls took (modeled: their sum). It is shared by the tokens
// the step computed, one per decode and a chunk's many: a prompt's prefill time is its share of
// each step that computed part of it, so that the shares add up to the instance's busy time.
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/coupled_worker/coupled_worker_actor.hpp"
#include "gpu/engine.hpp"
#include "storage/dram_pool.hpp"

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <memory>

namespace crescent {

/// Requests whose jobs an instance remembers, to refuse a second copy of one (recent_ids): the
/// last 16,384, some seconds of jobs at the most an instance takes.
inline constexpr size_t coupled_recent_jobs_max = 16384;

struct coupled_worker_options {
  uint32_t instance = 0;
  uint32_t node = 0;
  uint32_t batch_max = 64;       // sequences per step
  uint32_t queue_jobs_max = 256; // waiting for memory, at most
  bool chunked_prefill = false;  // see above
  uint32_t token_budget = 512;   // tokens per step (vLLM's max_num_batched_tokens)
  bool prefix_caching = false;   // keep whole prompt blocks in the instance's memory
  bool simulated_time = false;
  /// A thread of its own (actors/common/spawn_placement.hpp): real time only.
  bool own_thread = false;
};

/// What a coupled worker works with: its engine, its KV pages, and the directory (for the
/// conductor, to which it reports each prefill as a prefill instance does).
struct coupled_worker_parts {
  std::shared_ptr<gpu::engine> engine;
  std::shared_ptr<storage::dram_pool> kv_pages;
  directory_ref dir;
};

/// Errors: a pool already in use, or of over page_cache::pages_max pages.
caf::expected<coupled_worker_actor> spawn_coupled_worker(caf::actor_system& sys,
                                                         coupled_worker_options options,
                                                         coupled_worker_parts parts);

} // namespace crescent
