// Everything needed to bring a cluster up: the model, the nodes and what runs on each, and the
// limits of every actor. Defaults describe the embedded default cluster: four nodes, two with a
// prefill instance and two with a decode instance, a block owner on each, one conductor and one
// store master.
#pragma once

#include "actors/common/placement.hpp"
#include "actors/conductor/view.hpp"
#include "gpu/block_codec.hpp"
#include "gpu/engine.hpp"
#include "gpu/model_config.hpp"
#include "storage/eviction.hpp"
#include "transport/modeled_links.hpp"
#include "transport/transfer_types.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crescent {

struct node_config {
  uint32_t prefill_instances = 0;
  uint32_t decode_instances = 0;
  uint64_t pool_bytes = 64ull << 20; // this node's DRAM tier of KV blocks
  uint64_t ssd_bytes = 0;            // this node's SSD tier; 0: none
  // Where the `crescent node` process that hosts this node listens (host:port); empty: the node
  // runs in the cluster's main process. A hosted node runs its block owner, its prefill and
  // decode instances and its node agent; the conductor and store master stay in the main one.
  std::string address{};
  // When set, the DRAM tier holds this many tokens of KV instead of pool_bytes (whole blocks,
  // rounded down; see pool_bytes_of).
  uint64_t pool_tokens = 0;
  // When set, the SSD tier holds this many tokens of KV instead of ssd_bytes (ssd_bytes_of).
  uint64_t ssd_tokens = 0;
  // Coupled instances (prefill and decode on one engine, the vLLM-style baseline; coupled_config
  // below). A cluster with any has no prefill or decode instances.
  uint32_t coupled_instances = 0;
  // The cuda engine: the CUDA devices of this node's workers, taken in turn (its prefill, then
  // its decode, then its coupled instances); empty: every worker on engine.device.
  std::vector<uint32_t> devices{};

  bool hosted_elsewhere() const { return !address.empty(); }
};

/// CUDA devices a node may list (nodes[i].devices).
inline constexpr size_t node_devices_max = 16;
/// prefill.load_batch_bytes_max at most: 1 TiB.
inline constexpr uint64_t prefill_load_batch_bytes_limit = uint64_t{1} << 40;

/// The KV pool: replicas, placement, eviction, leases (see docs/kv_pool.md).
struct pool_config {
  uint32_t replicas = 1;
  placement_policy placement = placement_policy::local_first;
  storage::eviction_policy eviction = storage::eviction_policy::lru;
  double high_watermark = 0.90;
  double evict_fraction = 0.05;
  double promotion_reserve = 0.05; // DRAM puts may not take, kept for promotions from SSD
  uint32_t lease_ttl_ms = 5000;
  uint32_t put_timeout_ms = 30000;
  uint32_t node_timeout_ms = 5000;
  uint32_t sweep_ms = 500;
  // A block a prefill job read from another node becomes a replica on its node too, so that
  // hot prefixes spread (docs/scheduling.md).
  bool copy_pulled = true;
};

struct prefill_config {
  uint32_t chunk_tokens = 128;   // tokens per compute step
  uint32_t queue_jobs_max = 256; // jobs waiting at one instance, at most
  // Prompts of at least this many tokens stream their KV to decode layer by layer while they
  // compute; shorter ones send it in one batch after. 0: every prompt streams.
  uint32_t stream_min_tokens = 1024;
  uint32_t stream_layers = 1; // layers computed, then streamed, per step
  // A job stores its new blocks while the next one loads and computes (false: the next waits
  // for the store, as before; for A/B runs).
  bool overlap_store = true;
  // Chunked pipeline parallelism: consecutive groups of this many prefill instances share the
  // model's layers and take jobs as one (docs/prefill.md). 1: none.
  uint32_t group_instances = 1;
  // A load reads at most this much KV a batch, and has no more than this in flight when it reads
  // from other nodes, so that a long pull holds the holder's NIC for one batch at a time; and the
  // cached prefix goes to decode in batches of at most this much, two in flight, so that it
  // holds the decode instance's NIC for two batches at a time (docs/prefill.md). At least one
  // block. 256 MiB: 2.7 ms of an 800 Gbps NIC.
  uint64_t load_batch_bytes_max = uint64_t{256} << 20;
};

struct decode_config {
  uint64_t kv_bytes = 64ull << 20;    // KV memory of one decode instance
  uint64_t kv_tokens = 0;             // when set, KV memory for this many tokens instead
  uint32_t batch_max = 64;            // sequences per decode step
  uint32_t request_tokens_max = 8192; // prompt + output of one request, at most
};

/// Coupled instances (docs/coupled.md): one engine prefills and decodes in one continuous batch
/// in its own KV memory, as vLLM 0.5 did, the baseline of the paper's end-to-end figures.
struct coupled_config {
  uint64_t kv_tokens = 0;  // KV memory of one instance, in tokens; 0: decode's (decode_kv_bytes_of)
  uint32_t batch_max = 64; // requests in its batch
  uint32_t queue_jobs_max = 256; // requests waiting for memory, at most
  // false: a step prefills whole prompts while any waits, and decodes pause (vLLM's default
  // then); true: every step decodes all running requests and fills token_budget with chunks.
  bool chunked_prefill = false;
  // Tokens a step computes at most (vLLM's max_num_batched_tokens); 0: vLLM 0.5's default, 512
  // with chunked prefill and model.context_tokens_max without (coupled_token_budget).
  uint32_t token_budget = 0;
  // Whole prompt blocks stay in the instance's KV memory for later prompts (LRU), as vLLM's
  // automatic prefix caching; never in a pool.
  bool prefix_caching = false;
};

struct conductor_config {
  uint32_t heartbeat_timeout_ms = 5000; // a node silent this long takes no new requests
  // Placement (docs/scheduling.md): the policy, admission against the SLOs (the paper's TTFT
  // 30 s and TBT 100 ms by default), Algorithm 1's threshold, the random policy's seed.
  policy_kind policy = policy_kind::global_cache_aware;
  admission_mode admission = admission_mode::predicted_load;
  double kvcache_balancing_threshold = 1.5;
  // A decode instance within this share of the lowest predicted TBT may be chosen for fewer
  // hand-offs arriving at its NIC at once (schedule_view::decode_tbt_slack; 0: TBT alone).
  double decode_tbt_slack = 0.1;
  // Whether the prefix index follows blocks offloaded to the nodes' SSD tiers, so that a
  // placement plans to read them back (false: DRAM only, for comparison).
  bool ssd_index = true;
  uint32_t slo_ttft_ms = 30'000;
  uint32_t slo_tbt_ms = 100;
  uint64_t seed = 1;
  // The profile the conductor predicts times from; empty: the engine's own (conductor_model.hpp).
  std::string profile;
};

struct store_config {
  std::string db_path;      // RocksDB directory; empty: a fresh temporary directory
  bool sync_commits = true; // fsync each committed batch
  std::string ssd_dir;      // where nodes keep their SSD tiers; empty: next to db_path
};

/// The transfer engines of clusters that span processes (one process needs no sockets).
struct transfer_config {
  // Where the main process's data-plane server listens, and what the other processes connect
  // to: an address they can reach (not 0.0.0.0). Node processes listen on their address's host.
  std::string bind_host = "127.0.0.1";
  bool shm = true; // processes on one host map each other's memory; false: TCP between them too
  // The engine's other options: paths (RDMA, cuda), RDMA devices and fabric settings, TCP
  // connections, slice sizes, attempts and timeouts. The cluster sets the rest itself (the local
  // nodes, access keys, the address, shm above).
  transport::transfer_options engine;
};

/// The longest connection_timeout_ms (and connection_heartbeat_ms): an hour.
inline constexpr uint32_t connection_timeout_ms_max = 3'600'000;

/// The most request_retries_max may be: a request's attempts are numbered in the top byte of
/// the ids its messages carry, and each one holds an instance of each kind out of the next.
inline constexpr uint32_t request_retries_limit = 8;

struct cluster_config {
  gpu::model_config model;
  gpu::engine_options engine;
  std::vector<node_config> nodes{{1, 0}, {1, 0}, {0, 1}, {0, 1}};
  prefill_config prefill;
  decode_config decode;
  coupled_config coupled;
  conductor_config conductor;
  store_config store;
  pool_config pool;
  transfer_config transfer;
  // How pool blocks are stored (issue 23, docs/kv_compression.md): kv_codec none keeps the
  // engine's pages as they are; another codec stores them compressed in DRAM and on SSD, pool
  // reads carry them compressed, and so does the prefill-to-decode hand-off (codec.handoff).
  gpu::block_codec_options codec;
  // How a replayed trace becomes prompts: the tokens one 512-token trace block becomes. 0: one
  // model block (model.block_tokens; the scaled prompts of the small reference model); 512: the
  // trace's own lengths (the paper cluster). Token ids are drawn from each block's hash id.
  uint32_t trace_block_tokens = 0;
  uint32_t join_timeout_ms = 30000; // bring-up waits this long for each hosted node
  // How often the main process looks for a new process at a lost hosted node's address, and
  // takes it back when one answers there (cluster::rejoin_node). 0: never by itself.
  uint32_t rejoin_interval_ms = 1000;
  // How long a node process whose connection to its cluster closed (a partition or pause past
  // connection_timeout_ms) waits, with its node started afresh, to be taken back before it
  // ends. 0: it ends at once. A cluster that ends on purpose ends its node processes at once.
  uint32_t rejoin_wait_ms = 60000;
  // How `crescent up` starts a hosted node's process: a shell command with {crescent} (this
  // binary), {config} (the cluster file), {node}, {host}, {port} and {faults} (the node's
  // transfer-fault flags under a fault plan, quoted; else nothing) filled in, e.g.
  // "ssh {host} exec crescent node --config {config} --node {node} {faults}". Empty: `{crescent}
  // node --config {config} --node {node}` on this host, without a shell.
  std::string launcher;
  uint32_t heartbeat_interval_ms = 1000;
  // CAF's own heartbeats on every connection between this cluster's processes (0: off), and how
  // long a connection may carry nothing before its process closes it (connection_timeout_ms).
  // A pause or partition shorter than the timeout is survived; after a longer one the node
  // process cut off starts its node afresh and is taken back (rejoin_wait_ms, docs/faults.md).
  uint32_t connection_heartbeat_ms = 1000;
  uint32_t connection_timeout_ms = 30000;
  uint32_t request_deadline_ms = 300000;
  /// A request whose attempt fails for a reason not its own (an instance stopped or went
  /// silent, a job or its KV lost on the way) is placed again on other instances, at most this
  /// many times within its deadline (0: it fails at once); past its first token the new attempt
  /// continues the output (docs/design.md, "Retries").
  uint32_t request_retries_max = 0;
  /// Workers advance CAF's clock by each step's compute time instead of spending it: set for
  /// simulated time (`crescent replay --sim`, and tests on the deterministic scheduler), off in
  /// real time, where `crescent run` and `crescent node` refuse it.
  bool simulated_time = false;
  /// In real time, the workers (compute), the block owners (SSD I/O) and the store master
  /// (RocksDB syncs) each run on a thread of their own, never on the scheduler threads that
  /// serve the conductor and the request actors (actors/common/spawn_placement.hpp); false: all
  /// share the scheduler. Simulated time ignores it: everything runs on the virtual clock.
  bool own_threads = true;
  uint64_t access_key_seed = 0; // 0: random access keys
};

/// Limits on the cluster shape.
inline constexpr size_t cluster_nodes_max = 256; // node_set::capacity: the prefix index's sets
inline constexpr uint32_t instances_per_node_max = 16;

/// A node process's address, "host:port" with a port in [1, 65535].
struct node_address {
  std::string host;
  uint16_t port = 0;
};
caf::expected<node_address> parse_node_address(const std::string& text);

/// Whether any node is hosted by another process (the actor system then needs the middleman).
bool spans_processes(const cluster_config& cfg);

/// Index of node `node`'s first decode (prefill) instance: instances are numbered node by node.
uint32_t first_decode_instance(const cluster_config& cfg, uint32_t node);
uint32_t first_prefill_instance(const cluster_config& cfg, uint32_t node);

/// Whether the cluster's instances are coupled (coupled_config) rather than disaggregated.
bool is_coupled(const cluster_config& cfg);

/// Whether the actors that compute or block on I/O get threads of their own (own_threads, in
/// real time only).
inline bool own_threads(const cluster_config& cfg) {
  return cfg.own_threads && !cfg.simulated_time;
}

/// The modeled links of a cluster whose engine is modeled: the profile's NIC, host-to-device
/// bandwidth and latency, bytes scaled from stand-ins to the model's pages.
transport::link_profile link_profile_of(const cluster_config& cfg);

/// trace_block_tokens, with 0 resolved to model.block_tokens.
uint32_t tokens_per_trace_block(const cluster_config& cfg);

/// The options of a transfer engine of this cluster, for a process serving `local_nodes` whose
/// data-plane server listens on `host`.
transport::transfer_options transfer_options_for(const cluster_config& cfg,
                                                 std::vector<uint32_t> local_nodes,
                                                 const std::string& host);

/// The bytes of node `node`'s DRAM tier, of its SSD tier (0: none) and of one decode instance's
/// KV memory, in the model's true page size (pool_tokens, ssd_tokens and kv_tokens, where set,
/// decide).
uint64_t pool_bytes_of(const cluster_config& cfg, uint32_t node);
uint64_t ssd_bytes_of(const cluster_config& cfg, uint32_t node);
uint64_t decode_kv_bytes_of(const cluster_config& cfg);
/// The KV memory of one coupled instance, in the model's true page size.
uint64_t coupled_kv_bytes_of(const cluster_config& cfg);
/// coupled.token_budget, with 0 resolved to vLLM 0.5's default.
uint32_t coupled_token_budget(const cluster_config& cfg);

/// Checks every field; the error names the field ("nodes[2].pool_mib: ...").
caf::error validate(const cluster_config& cfg);

/// Refuses what cannot run in real time (crescent run, crescent node): simulated_time, which is
/// `crescent replay --sim`'s, and the modeled engine, which computes nothing.
caf::error check_real_time(const cluster_config& cfg);

/// Reads a YAML cluster file over the defaults. Unknown keys are errors (a typo must not be
/// silently ignored); every error names the file, the field and, where known, the line. An
/// engine.profile (modeled engine) is loaded too: a built-in name, or a file relative to the
/// cluster file's directory.
caf::expected<cluster_config> load_cluster_config(const std::string& path);

/// The config as a cluster file, every field written (cluster_config_print.cpp); reading it back
/// gives the same config. Sizes are written as given (pool_tokens, kv_tokens) or in whole MiB.
std::string format_cluster_config(const cluster_config& cfg);
caf::expected<cluster_config> parse_cluster_config(const std::string& yaml_text,
                                                   const std::string& source_name,
                                                   const std::string& base_dir = "");

} // namespace crescent
