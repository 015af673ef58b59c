// The YAML form of a cluster_config, every field written: what `crescent replay --print-cluster`
// prints to start a file from. parse_cluster_config reads it back to the same config.
#include "actors/cluster/cluster_config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <string>

namespace crescent {

namespace {

const char* to_text(gpu::engine_kind k) {
  switch (k) {
  case gpu::engine_kind::modeled:
    return "modeled";
  case gpu::engine_kind::cuda:
    return "cuda";
  case gpu::engine_kind::reference:
    break;
  }
  return "reference";
}

const char* to_text(gpu::timing_mode t) {
  return t == gpu::timing_mode::modeled ? "modeled" : "measured";
}

const char* to_text(bool b) {
  return b ? "true" : "false";
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string list(const std::vector<std::string>& xs) {
  std::string out = "[";
  for (size_t i = 0; i < xs.size(); ++i)
    out += (i == 0 ? "" : ", ") + quoted(xs[i]);
  return out + "]";
}

void print_model(std::string& out, const cluster_config& c) {
  const auto& m = c.model;
  fmt::format_to(std::back_inserter(out),
                 "model:\n  layers: {}\n  d_model: {}\n  heads: {}\n  kv_heads: {}\n  ffn: {}\n"
                 "  vocab: {}\n  kv_element_bytes: {}\n  block_tokens: {}\n"
                 "  context_tokens_max: {}\n  seed: {}\n",
                 m.layers, m.d_model, m.heads, m.kv_heads, m.ffn, m.vocab, m.kv_element_bytes,
                 m.block_tokens, m.context_tokens_max, m.seed);
  const auto& e = c.engine;
  fmt::format_to(std::back_inserter(out), "engine:\n  kind: {}\n", to_text(e.kind));
  if (e.kind == gpu::engine_kind::modeled)
    fmt::format_to(std::back_inserter(out), "  profile: {}\n", quoted(e.profile_name));
  if (e.kind == gpu::engine_kind::cuda)
    fmt::format_to(std::back_inserter(out), "  device: {}\n", e.device);
  fmt::format_to(std::back_inserter(out), "  timing: {}\n  modeled_flops_per_s: {}\n",
                 to_text(e.timing), e.modeled_flops_per_s);
}

void print_nodes(std::string& out, const cluster_config& c) {
  out += "nodes:\n";
  for (const auto& n : c.nodes) {
    fmt::format_to(std::back_inserter(out), "  - {{prefill: {}, decode: {}, coupled: {}, ",
                   n.prefill_instances, n.decode_instances, n.coupled_instances);
    if (n.pool_tokens != 0)
      fmt::format_to(std::back_inserter(out), "pool_tokens: {}", n.pool_tokens);
    else
      fmt::format_to(std::back_inserter(out), "pool_mib: {}", n.pool_bytes >> 20);
    if (n.ssd_tokens != 0)
      fmt::format_to(std::back_inserter(out), ", ssd_tokens: {}", n.ssd_tokens);
    else
      fmt::format_to(std::back_inserter(out), ", ssd_mib: {}", n.ssd_bytes >> 20);
    if (!n.devices.empty())
      fmt::format_to(std::back_inserter(out), ", devices: [{}]", fmt::join(n.devices, ", "));
    if (n.hosted_elsewhere())
      fmt::format_to(std::back_inserter(out), ", address: {}", quoted(n.address));
    out += "}\n";
  }
}

void print_pool(std::string& out, const cluster_config& c) {
  const auto& p = c.pool;
  fmt::format_to(std::back_inserter(out),
                 "pool:\n  replicas: {}\n  placement: {}\n  eviction: {}\n  high_watermark: {}\n"
                 "  evict_fraction: {}\n  promotion_reserve: {}\n  lease_ttl_ms: {}\n"
                 "  put_timeout_ms: {}\n  node_timeout_ms: {}\n  sweep_ms: {}\n  copy_pulled: {}\n",
                 p.replicas, to_string(p.placement), storage::to_string(p.eviction),
                 p.high_watermark, p.evict_fraction, p.promotion_reserve, p.lease_ttl_ms,
                 p.put_timeout_ms, p.node_timeout_ms, p.sweep_ms, p.copy_pulled);
}

void print_workers(std::string& out, const cluster_config& c) {
  fmt::format_to(std::back_inserter(out),
                 "prefill:\n  chunk_tokens: {}\n  queue_jobs_max: {}\n  stream_min_tokens: {}\n"
                 "  stream_layers: {}\n  overlap_store: {}\n  group_instances: {}\n"
                 "  load_batch_bytes_max: {}\n",
                 c.prefill.chunk_tokens, c.prefill.queue_jobs_max, c.prefill.stream_min_tokens,
                 c.prefill.stream_layers, c.prefill.overlap_store, c.prefill.group_instances,
                 c.prefill.load_batch_bytes_max);
  out += "decode:\n";
  if (c.decode.kv_tokens != 0)
    fmt::format_to(std::back_inserter(out), "  kv_tokens: {}\n", c.decode.kv_tokens);
  else
    fmt::format_to(std::back_inserter(out), "  kv_mib: {}\n", c.decode.kv_bytes >> 20);
  fmt::format_to(std::back_inserter(out), "  batch_max: {}\n  request_tokens_max: {}\n",
                 c.decode.batch_max, c.decode.request_tokens_max);
  const auto& p = c.coupled;
  out += "coupled:\n";
  if (p.kv_tokens != 0)
    fmt::format_to(std::back_inserter(out), "  kv_tokens: {}\n", p.kv_tokens);
  fmt::format_to(std::back_inserter(out),
                 "  batch_max: {}\n  queue_jobs_max: {}\n  chunked_prefill: {}\n"
                 "  token_budget: {}\n  prefix_caching: {}\n",
                 p.batch_max, p.queue_jobs_max, to_text(p.chunked_prefill), p.token_budget,
                 to_text(p.prefix_caching));
  const auto& k = c.conductor;
  fmt::format_to(std::back_inserter(out),
                 "conductor:\n  heartbeat_timeout_ms: {}\n  policy: {}\n  admission: {}\n"
                 "  kvcache_balancing_threshold: {}\n  decode_tbt_slack: {}\n  ssd_index: {}\n"
                 "  slo: {{ttft_ms: {}, tbt_ms: {}}}\n  seed: {}\n  profile: {}\n",
                 k.heartbeat_timeout_ms, to_string(k.policy), to_string(k.admission),
                 k.kvcache_balancing_threshold, k.decode_tbt_slack, to_text(k.ssd_index),
                 k.slo_ttft_ms, k.slo_tbt_ms, k.seed, quoted(k.profile));
  fmt::format_to(std::back_inserter(out),
                 "store:\n  db_path: {}\n  sync_commits: {}\n  ssd_dir: {}\n",
                 quoted(c.store.db_path), to_text(c.store.sync_commits), quoted(c.store.ssd_dir));
  const auto& x = c.codec;
  fmt::format_to(std::back_inserter(out),
                 "kv_codec: {}\ncodec:\n  group_tokens: {}\n  sink_tokens: {}\n"
                 "  calibration_prompts: {}\n  calibration_prompt_tokens: {}\n"
                 "  calibration_seed: {}\n  handoff: {}\n",
                 storage::codec::to_string(x.kind), x.group_tokens, x.sink_tokens,
                 x.calibration_prompts, x.calibration_prompt_tokens, x.calibration_seed,
                 to_text(x.handoff));
}

void print_transfer(std::string& out, const cluster_config& c) {
  const auto& t = c.transfer;
  const auto& o = t.engine;
  fmt::format_to(std::back_inserter(out),
                 "transfer:\n  bind_host: {}\n  shm: {}\n  rdma: {}\n  cuda: {}\n"
                 "  rdma_devices: {}\n  rdma_fallback_devices: {}\n  rdma_gid_index: {}\n"
                 "  rdma_traffic_class: {}\n  rdma_service_level: {}\n  rdma_qps_per_peer: {}\n"
                 "  rdma_queue_depth: {}\n  rdma_qp_timeout: {}\n  rdma_retry_count: {}\n",
                 quoted(t.bind_host), to_text(t.shm), to_text(o.enable_rdma),
                 to_text(o.enable_cuda), list(o.rdma_preferred_devices),
                 list(o.rdma_fallback_devices), o.rdma_gid_index, o.rdma_traffic_class,
                 o.rdma_service_level, o.rdma_qps_per_peer, o.rdma_queue_depth, o.rdma_qp_timeout,
                 o.rdma_retry_count);
  fmt::format_to(std::back_inserter(out),
                 "  tcp_connections: {}\n  slice_kib: {}\n  tcp_slice_kib: {}\n"
                 "  copy_slice_kib: {}\n  slice_attempts: {}\n  connect_timeout_ms: {}\n"
                 "  peer_silence_ms: {}\n",
                 o.tcp_connections_per_peer, o.slice_bytes >> 10, o.tcp_slice_bytes >> 10,
                 o.copy_slice_bytes >> 10, o.slice_attempts_max, o.connect_timeout.count(),
                 o.tcp_peer_silence_max.count());
}

} // namespace

std::string format_cluster_config(const cluster_config& c) {
  std::string out;
  print_model(out, c);
  print_nodes(out, c);
  print_pool(out, c);
  print_workers(out, c);
  print_transfer(out, c);
  fmt::format_to(
      std::back_inserter(out),
      "trace_block_tokens: {}\nlauncher: {}\njoin_timeout_ms: {}\nrejoin_interval_ms: {}\n"
      "rejoin_wait_ms: {}\n"
      "heartbeat_interval_ms: {}\nconnection_heartbeat_ms: {}\n"
      "connection_timeout_ms: {}\nrequest_deadline_ms: {}\nrequest_retries_max: {}\n"
      "simulated_time: {}\nown_threads: {}\naccess_key_seed: {}\n",
      c.trace_block_tokens, quoted(c.launcher), c.join_timeout_ms, c.rejoin_interval_ms,
      c.rejoin_wait_ms, c.heartbeat_interval_ms, c.connection_heartbeat_ms, c.connection_timeout_ms,
      c.request_deadline_ms, c.request_retries_max, to_text(c.simulated_time),
      to_text(c.own_threads), c.access_key_seed);
  return out;
}

} // namespace crescent
