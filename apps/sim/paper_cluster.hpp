// The built-in cluster of `crescent replay --sim`: the Mooncake paper's setting (FAST'25, Table
// 1 and section 8), 16 nodes of 8 x A800 serving LLaMA3-70B on the modeled engine.
//
// - 8 prefill and 8 decode instances, one per node: the paper's end-to-end runs use 16 nodes
//   split between the two roles; an even split is our choice (the paper tunes it per workload).
// - 3M tokens of DRAM KV per node (about 1 TB at 320 KB a token): the paper's local cache size.
//   No SSD tier (not modeled yet).
// - Blocks of 512 tokens, the traces' own (the paper's end-to-end runs use 256: set
//   model.block_tokens; each 512-token trace block then becomes two blocks).
// - Decode KV memory: what 8 x 80 GB of HBM holds beside the 141 GB of weights (1.52M tokens).
// - Prefill in chunks of 8,192 tokens (the paper chunks prompts above about 1,000 tokens; in
//   modeled time the chunk size changes only how often a worker serves its mailbox).
// - KV streamed to decode for prompts of 1,024 tokens or more, 8 of the 80 layers a step: ten
//   steps a chunk. A layer a step hides about the same share of the transfer on the synthetic
//   trace (84.5% against 83.3% for prompts of 8k tokens and more) in three times the wall
//   time (docs/benchmarks.md).
// - The pool as Mooncake Store: one replica, local first, LRU, evicting 5% at 90% full.
// - Contexts up to 262,144 tokens: the trace's longest prompt has 191,378.
// `crescent replay --print-cluster` prints it as a cluster file, every field.
#pragma once

#include "actors/cluster/cluster_config.hpp"

#include <caf/expected.hpp>

namespace crescent::sim {

inline constexpr const char* paper_profile = "llama3-70b-8xa800";

caf::expected<cluster_config> paper_cluster();

/// The baseline of the paper's end-to-end figures on the same 16 nodes: a coupled instance on each
/// (vLLM-style, docs/coupled.md), its KV memory and batch a decode instance's, routed by
/// `routing` (least_loaded: a load balancer that knows nothing of caches; or local_cache_aware),
/// no admission; with chunked prefill (vLLM 0.5's 512-token budget) and prefix caching (in each
/// instance's own KV memory) as asked. Pools of one block: coupled instances use none.
caf::expected<cluster_config>
paper_coupled_cluster(bool chunked_prefill, bool prefix_caching,
                      policy_kind routing = policy_kind::least_loaded);

/// The same from any disaggregated cluster `c`: its nodes, each with one coupled instance with a
/// decode instance's KV memory and batch, and its model, engine and limits.
caf::expected<cluster_config> as_coupled(cluster_config c, bool chunked_prefill,
                                         bool prefix_caching,
                                         policy_kind routing = policy_kind::least_loaded);

/// The names of `crescent replay --coupled`: prefill-first, chunked-prefill, prefix-caching,
/// chunked-prefix-caching; false for another name.
bool parse_coupled_mode(std::string_view name, bool& chunked_prefill, bool& prefix_caching);

/// The cluster of the hit-rate agreement check: the paper cluster's model and profile on one
/// node, with a prefill and a decode instance, whose pool evicts exactly down to
/// `capacity_tokens` (0: no limit) in LRU order: its arena holds twice that, evicts past half
/// of it (high_watermark 0.5) and frees nothing beyond (evict_fraction 0), so that a request's
/// new blocks all find room before the oldest go. With requests that never overlap it is the
/// one global LRU cache of `crescent analyze hitrate`.
caf::expected<cluster_config> one_pool_node_cluster(uint64_t capacity_tokens);

} // namespace crescent::sim
