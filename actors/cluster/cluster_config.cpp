#include "actors/cluster/cluster_config.hpp"

#include "gpu/modeled_engine.hpp"
#include "gpu/modeled_profile.hpp"
#include "messages/errors.hpp"
#include "transport/peer_wire.hpp"
#include "transport/region_table.hpp"
#include "transport/transfer_engine.hpp"

#include <algorithm>
#include <cmath>
#include <set>

namespace crescent {

namespace {

caf::error field_error(const std::string& field, const std::string& what) {
  return make_error(errc::bad_config, field + ": " + what);
}

caf::error validate_hosting(const cluster_config& cfg) {
  std::set<std::string> addresses;
  for (size_t i = 0; i < cfg.nodes.size(); ++i) {
    const auto& n = cfg.nodes[i];
    if (!n.hosted_elsewhere())
      continue;
    const std::string name = "nodes[" + std::to_string(i) + "]";
    if (auto a = parse_node_address(n.address); !a)
      return field_error(name + ".address", describe(a.error()));
    if (!addresses.insert(n.address).second)
      return field_error(name + ".address", n.address + " is the address of another node too");
  }
  if (addresses.size() == cfg.nodes.size())
    return field_error("nodes", "at least one node runs in the main process (has no address): "
                                "its memory is what the node processes reach it by");
  if (cfg.transfer.bind_host.empty())
    return field_error("transfer.bind_host", "must name an address to listen on");
  if (cfg.join_timeout_ms == 0)
    return field_error("join_timeout_ms", "must be positive");
  return caf::none;
}

} // namespace

caf::expected<node_address> parse_node_address(const std::string& text) {
  const auto colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == text.size())
    return make_error(errc::invalid_argument, "'" + text + "' is not host:port");
  const auto port_text = text.substr(colon + 1);
  if (port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos)
    return make_error(errc::invalid_argument, "'" + port_text + "' is not a port number");
  const auto port = std::stoul(port_text);
  if (port == 0 || port > 65535)
    return make_error(errc::invalid_argument, "port " + port_text + " is not in [1, 65535]");
  return node_address{text.substr(0, colon), static_cast<uint16_t>(port)};
}

bool spans_processes(const cluster_config& cfg) {
  for (const auto& n : cfg.nodes)
    if (n.hosted_elsewhere())
      return true;
  return false;
}

uint32_t first_decode_instance(const cluster_config& cfg, uint32_t node) {
  uint32_t first = 0;
  for (uint32_t i = 0; i < node && i < cfg.nodes.size(); ++i)
    first += cfg.nodes[i].decode_instances;
  return first;
}

uint32_t first_prefill_instance(const cluster_config& cfg, uint32_t node) {
  uint32_t first = 0;
  for (uint32_t i = 0; i < node && i < cfg.nodes.size(); ++i)
    first += cfg.nodes[i].prefill_instances;
  return first;
}

// Whole blocks, rounded down: a pool of 3M tokens never holds more than 3M tokens.
namespace {

// Whole blocks of `tokens`, in bytes; saturates (validate then refuses the block count).
uint64_t tokens_to_bytes(const cluster_config& cfg, uint64_t tokens) {
  const uint64_t blocks = tokens / cfg.model.block_tokens;
  const uint64_t page = cfg.model.page_bytes();
  return page != 0 && blocks > UINT64_MAX / page ? UINT64_MAX : blocks * page;
}

} // namespace

uint64_t pool_bytes_of(const cluster_config& cfg, uint32_t node) {
  const auto& n = cfg.nodes.at(node);
  return n.pool_tokens == 0 ? n.pool_bytes : tokens_to_bytes(cfg, n.pool_tokens);
}

uint64_t ssd_bytes_of(const cluster_config& cfg, uint32_t node) {
  const auto& n = cfg.nodes.at(node);
  return n.ssd_tokens == 0 ? n.ssd_bytes : tokens_to_bytes(cfg, n.ssd_tokens);
}

uint64_t decode_kv_bytes_of(const cluster_config& cfg) {
  return cfg.decode.kv_tokens == 0 ? cfg.decode.kv_bytes
                                   : tokens_to_bytes(cfg, cfg.decode.kv_tokens);
}

uint64_t coupled_kv_bytes_of(const cluster_config& cfg) {
  return cfg.coupled.kv_tokens == 0 ? decode_kv_bytes_of(cfg)
                                    : tokens_to_bytes(cfg, cfg.coupled.kv_tokens);
}

uint32_t coupled_token_budget(const cluster_config& cfg) {
  if (cfg.coupled.token_budget != 0)
    return cfg.coupled.token_budget;
  return cfg.coupled.chunked_prefill ? std::min<uint32_t>(512, cfg.model.context_tokens_max)
                                     : cfg.model.context_tokens_max;
}

bool is_coupled(const cluster_config& cfg) {
  for (const auto& n : cfg.nodes)
    if (n.coupled_instances > 0)
      return true;
  return false;
}

namespace {

// The engine section: the reference and cuda engines compute the reference model within its
// limits; a modeled engine needs its profile, computes nothing to measure, and its profile must
// describe the model.
caf::error validate_engine(const cluster_config& cfg) {
  const auto& e = cfg.engine;
  for (size_t i = 0; i < cfg.nodes.size(); ++i)
    if (!cfg.nodes[i].devices.empty() && e.kind != gpu::engine_kind::cuda)
      return field_error("nodes[" + std::to_string(i) + "].devices",
                         "only the cuda engine (engine.kind: cuda) runs on devices");
  if (e.kind == gpu::engine_kind::reference || e.kind == gpu::engine_kind::cuda) {
    if (auto err = gpu::check_reference_limits(cfg.model))
      return err;
    if (e.modeled_flops_per_s < 1e6 || e.modeled_flops_per_s > 1e18)
      return field_error("engine.modeled_flops_per_s", "must be in [1e6, 1e18]");
    return caf::none;
  }
  if (spans_processes(cfg))
    return field_error("engine.kind", "a modeled cluster runs in one process, in simulated "
                                      "time: no node may have an address");
  for (size_t i = 0; i < cfg.nodes.size(); ++i)
    if (ssd_bytes_of(cfg, static_cast<uint32_t>(i)) != 0 && e.profile && !e.profile->has_ssd())
      return field_error("nodes[" + std::to_string(i) + "]." +
                             (cfg.nodes[i].ssd_tokens != 0 ? "ssd_tokens" : "ssd_mib"),
                         "an SSD tier needs the profile's SSD (machine.ssd_read_bytes_per_s, "
                         "ssd_write_bytes_per_s): profile " +
                             e.profile->name + " gives none");
  if (cfg.model.page_bytes() % gpu::standin_page_bytes(cfg.model) != 0)
    return field_error("model", "a modeled page (" + std::to_string(cfg.model.page_bytes()) +
                                    " bytes) must be a multiple of its stand-in of 64 bytes a "
                                    "layer");
  if (e.timing == gpu::timing_mode::measured)
    return field_error("engine.timing", "measured cannot go with engine.kind modeled: the "
                                        "modeled engine computes nothing to measure");
  if (!e.profile)
    return field_error("engine.profile", "the modeled engine needs a profile");
  if (auto err = gpu::validate(*e.profile))
    return err;
  return gpu::check_model(*e.profile, cfg.model);
}

// A coupled cluster: coupled instances only, in this process, routed by a policy that needs no
// pool, without admission (vLLM had none).
caf::error validate_coupled(const cluster_config& cfg) {
  const auto& c = cfg.coupled;
  for (size_t i = 0; i < cfg.nodes.size(); ++i) {
    const auto& n = cfg.nodes[i];
    const std::string name = "nodes[" + std::to_string(i) + "]";
    if (n.prefill_instances > 0 || n.decode_instances > 0)
      return field_error(name, "a cluster's instances are all coupled or none are: this node has "
                               "prefill or decode instances beside coupled ones elsewhere");
    if (n.coupled_instances > 0 && n.hosted_elsewhere())
      return field_error(name + ".address", "coupled instances run in the cluster's main process "
                                            "only (not across processes yet)");
  }
  if (cfg.conductor.policy == policy_kind::global_cache_aware)
    return field_error("conductor.policy", "global_cache_aware pulls blocks from other nodes' "
                                           "pools, which coupled instances do not have: take "
                                           "least_loaded or local_cache_aware");
  if (cfg.conductor.admission != admission_mode::none)
    return field_error("conductor.admission", "coupled instances (the vLLM baseline) take no "
                                              "admission control: none");
  if (c.batch_max == 0 || c.batch_max > 4096)
    return field_error("coupled.batch_max", "must be in [1, 4096]");
  if (c.queue_jobs_max == 0 || c.queue_jobs_max > 65536)
    return field_error("coupled.queue_jobs_max", "must be in [1, 65536]");
  const uint32_t budget = coupled_token_budget(cfg);
  if (budget > cfg.model.context_tokens_max || (c.chunked_prefill && budget <= c.batch_max))
    return field_error("coupled.token_budget",
                       "is " + std::to_string(budget) +
                           ": must be at most model.context_tokens_max and, with chunked prefill, "
                           "above coupled.batch_max (a step decodes up to that many tokens and "
                           "prefills with the rest)");
  // A request larger than an instance's memory is refused when it comes (rejected, the reason
  // named), as a reservation too large for a decode instance is.
  const uint64_t page = cfg.model.page_bytes();
  const uint64_t kv = coupled_kv_bytes_of(cfg);
  if (kv / page < 1 || kv / page > (1u << 24))
    return field_error(c.kv_tokens != 0 ? "coupled.kv_tokens" : "decode.kv_mib",
                       "a coupled instance holds 1 to 2^24 pages");
  return caf::none;
}

// A launcher names only the placeholders `crescent up` fills in, and is of a sane length.
caf::error check_launcher(const std::string& launcher) {
  if (launcher.size() > 4096)
    return field_error("launcher", "at most 4096 characters");
  for (size_t at = launcher.find('{'); at != std::string::npos; at = launcher.find('{', at + 1)) {
    const auto end = launcher.find('}', at);
    const auto name = launcher.substr(at + 1, end == std::string::npos ? 0 : end - at - 1);
    if (end == std::string::npos || (name != "crescent" && name != "config" && name != "node" &&
                                     name != "host" && name != "port" && name != "faults"))
      return field_error("launcher", "'{" + name + (end == std::string::npos ? "" : "}") +
                                         "' is not {crescent}, {config}, {node}, {host}, {port} "
                                         "or {faults}");
  }
  return caf::none;
}

} // namespace

caf::error validate(const cluster_config& cfg) {
  if (auto err = gpu::validate(cfg.model))
    return err;
  if (auto err = validate_engine(cfg))
    return err;
  if (cfg.nodes.empty() || cfg.nodes.size() > cluster_nodes_max)
    return field_error("nodes",
                       "a cluster has 1 to " + std::to_string(cluster_nodes_max) + " nodes");
  // A process learns every other's transfer address from one directory message.
  if (spans_processes(cfg) && cfg.nodes.size() > transport::peer_nodes_max)
    return field_error("nodes", "a cluster across processes has at most " +
                                    std::to_string(transport::peer_nodes_max) + " nodes");
  uint32_t prefill = 0;
  uint32_t decode = 0;
  const uint64_t page = cfg.model.page_bytes();
  for (size_t i = 0; i < cfg.nodes.size(); ++i) {
    const auto& n = cfg.nodes[i];
    const std::string name = "nodes[" + std::to_string(i) + "]";
    if (n.prefill_instances > instances_per_node_max ||
        n.decode_instances > instances_per_node_max || n.coupled_instances > instances_per_node_max)
      return field_error(name, "at most 16 prefill, 16 decode and 16 coupled instances per node");
    const uint64_t pool = pool_bytes_of(cfg, static_cast<uint32_t>(i));
    if (pool < page || pool / page > (1u << 24))
      return field_error(name + (n.pool_tokens != 0 ? ".pool_tokens" : ".pool_mib"),
                         "the pool must hold 1 to 2^24 blocks of " + std::to_string(page) +
                             " bytes");
    const uint64_t ssd = ssd_bytes_of(cfg, static_cast<uint32_t>(i));
    if (ssd != 0 && (ssd < page || ssd / page > (1u << 24)))
      return field_error(name + (n.ssd_tokens != 0 ? ".ssd_tokens" : ".ssd_mib"),
                         "the SSD tier must hold 1 to 2^24 blocks of " + std::to_string(page) +
                             " bytes");
    prefill += n.prefill_instances;
    decode += n.decode_instances;
  }
  if (is_coupled(cfg)) {
    if (auto err = validate_coupled(cfg))
      return err;
  } else if (prefill == 0 || decode == 0) {
    return field_error("nodes", "the cluster needs at least one prefill and one decode instance, "
                                "or coupled instances");
  }
  if (cfg.prefill.chunk_tokens == 0 || cfg.prefill.chunk_tokens > cfg.model.context_tokens_max)
    return field_error("prefill.chunk_tokens", "must be in [1, model.context_tokens_max]");
  if (cfg.prefill.queue_jobs_max == 0 || cfg.prefill.queue_jobs_max > 65536)
    return field_error("prefill.queue_jobs_max", "must be in [1, 65536]");
  if (cfg.prefill.stream_layers == 0 || cfg.prefill.stream_layers > cfg.model.layers)
    return field_error("prefill.stream_layers", "must be in [1, model.layers]");
  if (const auto x = cfg.prefill.group_instances; x != 1) {
    if (x == 0 || x > cfg.model.layers)
      return field_error("prefill.group_instances", "must be in [1, model.layers]");
    if (prefill % x != 0)
      return field_error("prefill.group_instances",
                         "the " + std::to_string(prefill) +
                             " prefill instances do not split into groups of " + std::to_string(x));
    // Each instance of a group holds an inbox and an outbox slot of a chunk's stream per chunk
    // of the longest prompt: float32, d_model a token, on the reference engine; the modeled
    // engine's stand-in is as small as its pages' (gpu/modeled_engine.cpp).
    const uint64_t chunks =
        (cfg.model.context_tokens_max + cfg.prefill.chunk_tokens - 1) / cfg.prefill.chunk_tokens;
    uint64_t slot = uint64_t{cfg.prefill.chunk_tokens} * cfg.model.d_model * 4;
    if (cfg.engine.kind == gpu::engine_kind::modeled)
      slot = 16 + slot / 2 / std::max<uint64_t>(1, page / gpu::standin_page_bytes(cfg.model)) + 8;
    if (slot > (64u << 20) || 2 * chunks * slot > (1ull << 30))
      return field_error("prefill.group_instances",
                         "the streams between stages would need " +
                             std::to_string(2 * chunks * slot) +
                             " bytes per instance (at most 1 GiB, 64 MiB a chunk): lower "
                             "prefill.chunk_tokens or model.context_tokens_max");
  }
  if (cfg.decode.batch_max == 0 || cfg.decode.batch_max > 4096)
    return field_error("decode.batch_max", "must be in [1, 4096]");
  if (cfg.decode.request_tokens_max < 2 ||
      cfg.decode.request_tokens_max > cfg.model.context_tokens_max)
    return field_error("decode.request_tokens_max", "must be in [2, model.context_tokens_max]");
  const uint64_t request_pages =
      (uint64_t{cfg.decode.request_tokens_max} + cfg.model.block_tokens - 1) /
      cfg.model.block_tokens;
  const uint64_t kv = decode_kv_bytes_of(cfg);
  if (kv / page < request_pages || kv / page > (1u << 24))
    return field_error(cfg.decode.kv_tokens != 0 ? "decode.kv_tokens" : "decode.kv_mib",
                       "must hold at least one request of decode.request_tokens_max tokens, "
                       "and at most 2^24 pages");
  if (cfg.heartbeat_interval_ms == 0 ||
      cfg.heartbeat_interval_ms >= cfg.conductor.heartbeat_timeout_ms)
    return field_error("heartbeat_interval_ms",
                       "must be positive and below conductor.heartbeat_timeout_ms");
  if (cfg.connection_heartbeat_ms != 0 &&
      cfg.connection_heartbeat_ms * uint64_t{2} > cfg.connection_timeout_ms)
    return field_error("connection_heartbeat_ms",
                       "must be 0 (off) or at most half of connection_timeout_ms");
  const auto& pool = cfg.pool;
  if (pool.replicas == 0 || pool.replicas > 8 || pool.replicas > cfg.nodes.size())
    return field_error("pool.replicas", "must be in [1, 8] and at most the number of nodes");
  if (!(pool.high_watermark > 0 && pool.high_watermark <= 1))
    return field_error("pool.high_watermark", "must be in (0, 1]");
  if (!(pool.evict_fraction >= 0 && pool.evict_fraction < pool.high_watermark))
    return field_error("pool.evict_fraction", "must be in [0, pool.high_watermark)");
  if (!(pool.promotion_reserve >= 0 && pool.promotion_reserve < 0.5))
    return field_error("pool.promotion_reserve", "must be in [0, 0.5)");
  if (pool.lease_ttl_ms == 0 || pool.put_timeout_ms == 0 || pool.sweep_ms == 0 ||
      pool.node_timeout_ms <= pool.sweep_ms)
    return field_error("pool", "lease_ttl_ms, put_timeout_ms and sweep_ms must be positive, "
                               "node_timeout_ms above sweep_ms");
  if (cfg.request_deadline_ms == 0)
    return field_error("request_deadline_ms", "must be positive");
  if (cfg.request_retries_max > request_retries_limit)
    return field_error("request_retries_max",
                       "must be at most " + std::to_string(request_retries_limit));
  if (!(cfg.conductor.kvcache_balancing_threshold >= 1 &&
        cfg.conductor.kvcache_balancing_threshold <= 1e6))
    return field_error("conductor.kvcache_balancing_threshold", "must be in [1, 1e6]");
  if (!(cfg.conductor.decode_tbt_slack >= 0 && cfg.conductor.decode_tbt_slack <= 10))
    return field_error("conductor.decode_tbt_slack", "must be in [0, 10]");
  if (cfg.conductor.slo_ttft_ms == 0 || cfg.conductor.slo_tbt_ms == 0)
    return field_error("conductor.slo", "ttft_ms and tbt_ms must be positive");
  if (auto err = gpu::check_block_codec(cfg.model, cfg.codec))
    return err;
  if (cfg.codec.kind != storage::codec::codec_kind::none && is_coupled(cfg))
    return field_error("kv_codec", "coupled instances keep their prefix cache in their own KV "
                                   "memory, never in the pool: a codec is for the pool");
  if (cfg.trace_block_tokens > 4096)
    return field_error("trace_block_tokens", "must be in [0, 4096]");
  if (auto err = check_launcher(cfg.launcher))
    return err;
  if (auto err = validate_hosting(cfg))
    return err;
  // Checked for one-process clusters too, which use none of it: a file fails the same way
  // whatever it describes.
  if (auto err = transport::check_transfer_options(cfg.transfer.engine))
    return field_error("transfer", describe(err));
  return caf::none;
}

uint32_t tokens_per_trace_block(const cluster_config& cfg) {
  return cfg.trace_block_tokens == 0 ? cfg.model.block_tokens : cfg.trace_block_tokens;
}

caf::error check_real_time(const cluster_config& cfg) {
  if (cfg.simulated_time)
    return field_error("simulated_time", "true is for simulated time, which crescent replay --sim "
                                         "runs; this command runs in real time");
  if (cfg.engine.kind == gpu::engine_kind::modeled)
    return field_error("engine.kind", "the modeled engine computes nothing and runs only in "
                                      "simulated time (crescent replay --sim)");
  return caf::none;
}

transport::link_profile link_profile_of(const cluster_config& cfg) {
  transport::link_profile l;
  const auto& p = *cfg.engine.profile;
  auto clamp = [](double bytes_per_s) {
    return static_cast<uint64_t>(std::clamp<double>(bytes_per_s, transport::link_bytes_per_s_min,
                                                    transport::link_bytes_per_s_max));
  };
  l.nic_bytes_per_s = clamp(p.nic_bytes_per_s);
  l.local_bytes_per_s = clamp(p.h2d_bytes_per_s);
  l.nic_latency_ns = static_cast<uint64_t>(std::ceil(p.nic_latency_s * 1e9));
  l.local_latency_ns = 0;
  l.bytes_scale = cfg.model.page_bytes() / gpu::standin_page_bytes(cfg.model);
  if (p.has_ssd()) {
    l.ssd_read_bytes_per_s = clamp(p.ssd_read_bytes_per_s);
    l.ssd_write_bytes_per_s = clamp(p.ssd_write_bytes_per_s);
    l.ssd_latency_ns = static_cast<uint64_t>(std::ceil(p.ssd_latency_s * 1e9));
  }
  return l;
}

transport::transfer_options transfer_options_for(const cluster_config& cfg,
                                                 std::vector<uint32_t> local_nodes,
                                                 const std::string& host) {
  auto o = cfg.transfer.engine;
  o.local_nodes = std::move(local_nodes);
  o.key_seed = cfg.access_key_seed;
  o.enable_shm = cfg.transfer.shm;
  o.tcp_bind_host = host;
  o.tcp_port = 0; // any free port: peers learn it through actor messages (TransportPeer)
  // Each pool block and each reserved decode page is a grant, a slot of the region table: the
  // largest table, whose slots cost memory only once used (peers map it, untouched, read-only).
  o.region_capacity = transport::region_table::capacity_max;
  return o;
}

} // namespace crescent
