#include "actors/cluster/cluster_config.hpp"
#include "actors/cluster/node_spawn.hpp"
#include "actors/cluster/profile_yaml.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace crescent {
namespace {

std::string error_of(const std::string& yaml) {
  auto cfg = parse_cluster_config(yaml, "c.yaml");
  EXPECT_FALSE(cfg) << "accepted:\n" << yaml;
  return cfg ? std::string{} : describe(cfg.error());
}

TEST(cluster_config, defaults_are_valid) {
  EXPECT_FALSE(validate(cluster_config{}));
  auto cfg = parse_cluster_config("", "empty.yaml");
  ASSERT_TRUE(cfg);
  EXPECT_EQ(cfg->nodes.size(), 4u);
}

TEST(cluster_config, reads_every_section) {
  auto cfg = parse_cluster_config(R"(
model: {layers: 3, d_model: 32, heads: 4, kv_heads: 1, ffn: 64, vocab: 128, block_tokens: 8,
        context_tokens_max: 1024, seed: 9}
engine: {timing: modeled, modeled_flops_per_s: 1e9}
nodes:
  - {prefill: 2, pool_mib: 8}
  - {decode: 1, pool_mib: 8}
prefill: {chunk_tokens: 32, queue_jobs_max: 10, load_batch_bytes_max: 4096}
decode: {kv_mib: 8, batch_max: 4, request_tokens_max: 512}
conductor: {heartbeat_timeout_ms: 900}
store: {db_path: /tmp/x, sync_commits: false}
heartbeat_interval_ms: 100
request_deadline_ms: 5000
simulated_time: true
access_key_seed: 5
)",
                                  "full.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->model.layers, 3u);
  EXPECT_EQ(cfg->engine.timing, gpu::timing_mode::modeled);
  ASSERT_EQ(cfg->nodes.size(), 2u);
  EXPECT_EQ(cfg->nodes[0].prefill_instances, 2u);
  EXPECT_EQ(cfg->nodes[1].pool_bytes, 8ull << 20);
  EXPECT_EQ(cfg->decode.batch_max, 4u);
  EXPECT_EQ(cfg->prefill.load_batch_bytes_max, 4096u);
  EXPECT_FALSE(cfg->store.sync_commits);
  EXPECT_TRUE(cfg->simulated_time);
}

TEST(cluster_config, errors_name_the_field_and_line) {
  auto e = error_of("model:\n  layers: 2\n  heds: 4\n");
  EXPECT_NE(e.find("c.yaml:3"), std::string::npos) << e;
  EXPECT_NE(e.find("model.heds: unknown field"), std::string::npos) << e;

  e = error_of("prefill:\n  chunk_tokens: -5\n");
  EXPECT_NE(e.find("prefill.chunk_tokens"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:2"), std::string::npos) << e;

  for (const char* bytes : {"0", "1099511627777"}) { // at least 1, at most 1 TiB
    e = error_of(std::string{"prefill: {load_batch_bytes_max: "} + bytes + "}\n");
    EXPECT_NE(e.find("prefill.load_batch_bytes_max"), std::string::npos) << e;
  }

  e = error_of("decode: {batch_max: lots}\n");
  EXPECT_NE(e.find("decode.batch_max: expected an integer"), std::string::npos) << e;

  e = error_of("nodes: [{prefill: 1}]\n");
  EXPECT_NE(e.find("decode instance"), std::string::npos) << e;

  e = error_of("model: {heads: 4, kv_heads: 3}\n");
  EXPECT_NE(e.find("kv_heads"), std::string::npos) << e;

  e = error_of("engine: {timing: fast}\n");
  EXPECT_NE(e.find("engine.timing"), std::string::npos) << e;

  e = error_of("nodes: [{prefill: 1, pool_mib: 0}, {decode: 1}]\n");
  EXPECT_NE(e.find("nodes[0].pool_mib"), std::string::npos) << e;

  e = error_of("pool: {promotion_reserve: 0.5}\n");
  EXPECT_NE(e.find("pool.promotion_reserve"), std::string::npos) << e;

  e = error_of("model: [1, 2\n");
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;

  e = error_of("- just\n- a list\n");
  EXPECT_NE(e.find("expected a mapping"), std::string::npos) << e;

  e = error_of("connection_heartbeat_ms: 600\nconnection_timeout_ms: 1000\n");
  EXPECT_NE(e.find("connection_heartbeat_ms: must be 0 (off) or at most half of "
                   "connection_timeout_ms"),
            std::string::npos)
      << e;
  e = error_of("connection_timeout_ms: 0\n");
  EXPECT_NE(e.find("connection_timeout_ms"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:1"), std::string::npos) << e;
  e = error_of("conductor: {decode_tbt_slack: -0.5}\n");
  EXPECT_NE(e.find("conductor.decode_tbt_slack: must be in [0, 10]"), std::string::npos) << e;

  e = error_of("launcher: \"ssh {hots} exec crescent node --node {node}\"\n");
  EXPECT_NE(
      e.find("launcher: '{hots}' is not {crescent}, {config}, {node}, {host}, {port} or {faults}"),
      std::string::npos)
      << e;
}

TEST(cluster_config, coupled_instances_and_their_errors) {
  auto cfg = parse_cluster_config("nodes: [{coupled: 2}, {coupled: 1}]\n"
                                  "coupled: {kv_tokens: 4096, batch_max: 8, queue_jobs_max: 9,\n"
                                  "          chunked_prefill: true, prefix_caching: true}\n"
                                  "conductor: {policy: local_cache_aware, admission: none}\n",
                                  "c.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_TRUE(is_coupled(*cfg));
  EXPECT_EQ(cfg->nodes[0].coupled_instances, 2u);
  EXPECT_EQ(cfg->coupled.kv_tokens, 4096u);
  EXPECT_EQ(cfg->coupled.batch_max, 8u);
  EXPECT_EQ(cfg->coupled.queue_jobs_max, 9u);
  EXPECT_TRUE(cfg->coupled.chunked_prefill);
  EXPECT_TRUE(cfg->coupled.prefix_caching);
  EXPECT_EQ(coupled_token_budget(*cfg), 512u) << "vLLM 0.5's default with chunked prefill";
  cfg->coupled.chunked_prefill = false;
  EXPECT_EQ(coupled_token_budget(*cfg), cfg->model.context_tokens_max);
  // Printed, it reads back the same.
  auto back = parse_cluster_config(format_cluster_config(*cfg), "printed.yaml");
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->nodes[1].coupled_instances, 1u);
  EXPECT_EQ(back->coupled.kv_tokens, 4096u);
  EXPECT_TRUE(back->coupled.prefix_caching);

  const std::string coupled = "nodes: [{coupled: 1}]\nconductor: {policy: least_loaded, "
                              "admission: none}\n";
  auto e = error_of("nodes: [{coupled: 1}, {prefill: 1}, {decode: 1}]\n"
                    "conductor: {policy: least_loaded, admission: none}\n");
  EXPECT_NE(e.find("all coupled or none"), std::string::npos) << e;
  e = error_of("nodes: [{coupled: 1}]\nconductor: {admission: none}\n");
  EXPECT_NE(e.find("conductor.policy: global_cache_aware"), std::string::npos) << e;
  e = error_of("nodes: [{coupled: 1}]\nconductor: {policy: least_loaded}\n");
  EXPECT_NE(e.find("conductor.admission"), std::string::npos) << e;
  e = error_of("nodes: [{coupled: 1, address: \"127.0.0.1:7301\"}]\n"
               "conductor: {policy: least_loaded, admission: none}\n");
  EXPECT_NE(e.find("nodes[0].address: coupled instances run in the cluster's main process"),
            std::string::npos)
      << e;
  e = error_of(coupled + "coupled: {chunked_prefill: true, batch_max: 600}\n");
  EXPECT_NE(e.find("coupled.token_budget: is 512"), std::string::npos) << e;
  e = error_of(coupled + "coupled: {prefix_caching: maybe}\n");
  EXPECT_NE(e.find("coupled.prefix_caching"), std::string::npos) << e;
  e = error_of(coupled + "coupled: {batch_max: 0}\n");
  EXPECT_NE(e.find("coupled.batch_max"), std::string::npos) << e;
  e = error_of("nodes: [{coupled: 17}]\n");
  EXPECT_NE(e.find("nodes[0].coupled"), std::string::npos) << e;
}

TEST(cluster_config, kv_codec_and_its_settings) {
  auto cfg =
      parse_cluster_config("kv_codec: kvquant3\n"
                           "codec: {group_tokens: 32, sink_tokens: 2, calibration_prompts: 3,"
                           " calibration_prompt_tokens: 100, calibration_seed: 7}\n",
                           "k.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->codec.kind, storage::codec::codec_kind::kvquant3);
  EXPECT_EQ(cfg->codec.group_tokens, 32u);
  EXPECT_EQ(cfg->codec.sink_tokens, 2u);
  EXPECT_EQ(cfg->codec.calibration_prompts, 3u);
  EXPECT_EQ(cfg->codec.calibration_prompt_tokens, 100u);
  EXPECT_EQ(cfg->codec.calibration_seed, 7u);
  auto back = parse_cluster_config(format_cluster_config(*cfg), "printed.yaml");
  ASSERT_TRUE(back) << describe(back.error());
  EXPECT_EQ(back->codec.kind, storage::codec::codec_kind::kvquant3);
  EXPECT_EQ(back->codec.calibration_seed, 7u);

  auto e = error_of("kv_codec: zstd\n");
  EXPECT_NE(e.find("kv_codec: expected none, int8, kivi2, kivi4, kvquant3 or kvquant4, got 'zstd'"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("c.yaml:1"), std::string::npos) << e;
  e = error_of("kv_codec: kivi4\ncodec: {group_tokens: 12}\n");
  EXPECT_NE(e.find("codec.group_tokens"), std::string::npos) << e;
  e = error_of("codec: {calibration_prompts: 0}\n");
  EXPECT_NE(e.find("codec.calibration_prompts"), std::string::npos) << e;
  e = error_of("codec: {level: 3}\n");
  EXPECT_NE(e.find("codec.level: unknown field"), std::string::npos) << e;
  e = error_of("kv_codec: int8\nmodel: {d_model: 40, heads: 4}\n");
  EXPECT_NE(e.find("codecs' limits"), std::string::npos) << e;
  e = error_of("kv_codec: int8\nnodes: [{coupled: 1}]\nconductor: {policy: least_loaded, "
               "admission: none}\n");
  EXPECT_NE(e.find("kv_codec"), std::string::npos) << e;
}

TEST(cluster_config, nodes_hosted_by_other_processes) {
  auto cfg = parse_cluster_config(R"(
nodes:
  - {prefill: 1}
  - {decode: 2, address: "10.0.0.7:7001"}
transfer: {bind_host: 0.0.0.0, shm: false}
join_timeout_ms: 5000
)",
                                  "hosted.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_FALSE(cfg->nodes[0].hosted_elsewhere());
  EXPECT_EQ(cfg->nodes[1].address, "10.0.0.7:7001");
  EXPECT_TRUE(spans_processes(*cfg));
  EXPECT_EQ(first_decode_instance(*cfg, 1), 0u);
  EXPECT_EQ(cfg->transfer.bind_host, "0.0.0.0");
  EXPECT_FALSE(cfg->transfer.shm);
  EXPECT_EQ(cfg->join_timeout_ms, 5000u);
  EXPECT_FALSE(spans_processes(cluster_config{}));

  auto a = parse_node_address("[::1]:80");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->host, "[::1]");
  EXPECT_EQ(a->port, 80);
  for (auto bad : {"host", "host:", ":80", "host:0", "host:65536", "host:8x", "host:123456"})
    EXPECT_FALSE(parse_node_address(bad)) << bad;

  auto e = error_of("nodes: [{prefill: 1}, {decode: 1, address: 'x:0'}]\n");
  EXPECT_NE(e.find("nodes[1].address"), std::string::npos) << e;
  EXPECT_NE(e.find("c.yaml:1"), std::string::npos) << e;
  e = error_of("nodes: [{prefill: 1, address: 'x:1'}, {decode: 1, address: 'x:1'}]\n");
  EXPECT_NE(e.find("nodes[1].address: x:1 is the address of another node too"), std::string::npos)
      << e;
  e = error_of("nodes: [{prefill: 1, address: 'x:1'}, {decode: 1, address: 'x:2'}]\n");
  EXPECT_NE(e.find("at least one node runs in the main process"), std::string::npos) << e;
  e = error_of("transfer: {shm: maybe}\n");
  EXPECT_NE(e.find("transfer.shm"), std::string::npos) << e;
  e = error_of("join_timeout_ms: 0\n");
  EXPECT_NE(e.find("join_timeout_ms"), std::string::npos) << e;
}

// Every key of the `transfer:` section reaches the transfer engine's options, and the
// options a process's engine is made with keep them.
TEST(cluster_config, transfer_section_sets_the_engine_options) {
  auto cfg = parse_cluster_config(R"(
nodes: [{prefill: 1}, {decode: 1, address: "127.0.0.1:7001"}]
transfer:
  rdma: false
  cuda: false
  rdma_devices: [mlx5_0, mlx5_1]
  rdma_fallback_devices: [mlx5_2]
  rdma_gid_index: 3
  rdma_traffic_class: 106
  rdma_service_level: 3
  rdma_qps_per_peer: 4
  rdma_queue_depth: 256
  rdma_qp_timeout: 14
  rdma_retry_count: 5
  tcp_connections: 2
  slice_kib: 128
  tcp_slice_kib: 512
  copy_slice_kib: 4096
  slice_attempts: 5
  connect_timeout_ms: 750
  peer_silence_ms: 9000
access_key_seed: 77
)",
                                  "t.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  auto o = transfer_options_for(*cfg, {0}, "10.1.2.3");
  EXPECT_FALSE(o.enable_rdma);
  EXPECT_FALSE(o.enable_cuda);
  EXPECT_TRUE(o.enable_shm);
  EXPECT_EQ(o.rdma_preferred_devices, (std::vector<std::string>{"mlx5_0", "mlx5_1"}));
  EXPECT_EQ(o.rdma_fallback_devices, (std::vector<std::string>{"mlx5_2"}));
  EXPECT_EQ(o.rdma_gid_index, 3);
  EXPECT_EQ(o.rdma_traffic_class, 106);
  EXPECT_EQ(o.rdma_service_level, 3);
  EXPECT_EQ(o.rdma_qps_per_peer, 4u);
  EXPECT_EQ(o.rdma_queue_depth, 256u);
  EXPECT_EQ(o.rdma_qp_timeout, 14);
  EXPECT_EQ(o.rdma_retry_count, 5);
  EXPECT_EQ(o.tcp_connections_per_peer, 2u);
  EXPECT_EQ(o.slice_bytes, 128u << 10);
  EXPECT_EQ(o.tcp_slice_bytes, 512u << 10);
  EXPECT_EQ(o.copy_slice_bytes, 4096u << 10);
  EXPECT_EQ(o.slice_attempts_max, 5u);
  EXPECT_EQ(o.connect_timeout, std::chrono::milliseconds(750));
  EXPECT_EQ(o.tcp_peer_silence_max, std::chrono::milliseconds(9000));
  EXPECT_EQ(o.local_nodes, (std::vector<uint32_t>{0}));
  EXPECT_EQ(o.tcp_bind_host, "10.1.2.3");
  EXPECT_EQ(o.key_seed, 77u);

  auto auto_gid = parse_cluster_config("transfer: {rdma_gid_index: -1}\n", "t.yaml");
  ASSERT_TRUE(auto_gid) << describe(auto_gid.error());
  EXPECT_EQ(auto_gid->transfer.engine.rdma_gid_index, -1);
}

// Values the engine would refuse are refused with the file's line and the engine's reason.
TEST(cluster_config, transfer_values_out_of_bounds_name_the_file_and_the_option) {
  struct bad_case {
    const char* yaml;
    const char* says;
  };
  for (auto [yaml, says] : std::initializer_list<bad_case>{
           {"transfer: {rdma_queue_depth: 5000}\n", "RDMA queue depth must be in [1, 4096]"},
           {"transfer: {rdma_gid_index: -2}\n", "transfer.rdma_gid_index: -2 is not in [-1, 255]"},
           {"transfer: {rdma_service_level: 16}\n", "service level must be in [0, 15]"},
           {"transfer: {rdma_qp_timeout: 0}\n", "queue pair timeout must be in [1, 31]"},
           {"transfer: {rdma_traffic_class: 256}\n", "transfer.rdma_traffic_class: 256 is not"},
           {"transfer: {tcp_connections: 65}\n", "TCP connections per peer must be in [1, 64]"},
           {"transfer: {tcp_slice_kib: 16385}\n", "slice sizes must be in [1, 16 MiB]"},
           {"transfer: {slice_kib: 0}\n", "transfer.slice_kib: 0 is not in"},
           {"transfer: {slice_attempts: 17}\n", "slice attempts must be in [1, 16]"},
           {"transfer: {connect_timeout_ms: 5}\n", "connect timeout must be in [10 ms, 10 min]"},
           {"transfer: {peer_silence_ms: 700000}\n", "silence limit must be in [10 ms, 10 min]"},
           {"transfer: {rdma_devices: mlx5_0}\n", "transfer.rdma_devices: expected a list"},
           {"transfer: {rdma_devices: [a, a]}\n", "RDMA device a is named twice"},
           {"transfer: {rdma_devices: ['']}\n", "RDMA device names have 1 to 63 bytes"},
           {"transfer: {rdma: sometimes}\n", "transfer.rdma: expected true or false"},
           {"transfer: {rdma_device: [a]}\n", "transfer.rdma_device: unknown field"},
       }) {
    auto e = error_of(yaml);
    EXPECT_NE(e.find("c.yaml:1"), std::string::npos) << yaml << e;
    EXPECT_NE(e.find(says), std::string::npos) << yaml << e;
  }
}

TEST(cluster_config, the_cuda_engine_names_its_device) {
  auto cfg = parse_cluster_config("engine: {kind: cuda, device: 3}\n", "c.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->engine.kind, gpu::engine_kind::cuda);
  EXPECT_EQ(cfg->engine.device, 3);
  const auto printed = format_cluster_config(*cfg);
  EXPECT_NE(printed.find("  kind: cuda\n  device: 3\n"), std::string::npos) << printed;
  auto again = parse_cluster_config(printed, "printed.yaml");
  ASSERT_TRUE(again) << describe(again.error());
  EXPECT_EQ(again->engine.kind, gpu::engine_kind::cuda);
  EXPECT_EQ(again->engine.device, 3);
  for (const auto& [yaml, says] : std::vector<std::pair<std::string, std::string>>{
           {"engine: {kind: cuda, device: 64}\n", "engine.device: 64 is not in [0, 63]"},
           {"engine: {kind: cuda, device: -1}\n", "engine.device"},
           {"engine: {device: 1}\n", "only the cuda engine (engine.kind: cuda) runs on a device"},
           {"engine: {kind: gpu}\n", "expected 'reference', 'modeled' or 'cuda', got 'gpu'"},
           {"engine: {kind: cuda}\nmodel: {kv_element_bytes: 2}\n", "kv_element_bytes"},
           {"engine: {kind: cuda}\nmodel: {layers: 80}\n", "layers"},
       }) {
    auto e = error_of(yaml);
    EXPECT_NE(e.find(says), std::string::npos) << yaml << e;
  }
}

TEST(cluster_config, a_node_lists_the_cuda_devices_its_workers_take_in_turn) {
  auto cfg = parse_cluster_config("engine: {kind: cuda, device: 7}\n"
                                  "nodes:\n"
                                  "  - {prefill: 2, decode: 1, devices: [4, 5]}\n"
                                  "  - {prefill: 1, decode: 2}\n"
                                  "  - {prefill: 1, decode: 2, devices: [0, 1, 2]}\n",
                                  "c.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->nodes[0].devices, (std::vector<uint32_t>{4, 5}));
  // Node 0: prefill 0, 1 and decode 0 take 4, 5, 4. Node 1 lists none: engine.device. Node 2:
  // prefill 3, then decode 3 and 4, take 0, 1, 2.
  EXPECT_EQ(device_of(*cfg, 0, worker_role::prefill, 0), 4);
  EXPECT_EQ(device_of(*cfg, 0, worker_role::prefill, 1), 5);
  EXPECT_EQ(device_of(*cfg, 0, worker_role::decode, 0), 4);
  EXPECT_EQ(device_of(*cfg, 1, worker_role::prefill, 2), 7);
  EXPECT_EQ(device_of(*cfg, 1, worker_role::decode, 2), 7);
  EXPECT_EQ(device_of(*cfg, 2, worker_role::prefill, 3), 0);
  EXPECT_EQ(device_of(*cfg, 2, worker_role::decode, 3), 1);
  EXPECT_EQ(device_of(*cfg, 2, worker_role::decode, 4), 2);
  const auto printed = format_cluster_config(*cfg);
  EXPECT_NE(printed.find("devices: [0, 1, 2]"), std::string::npos) << printed;
  auto again = parse_cluster_config(printed, "printed.yaml");
  ASSERT_TRUE(again) << describe(again.error());
  EXPECT_EQ(again->nodes[2].devices, cfg->nodes[2].devices);
  for (const auto& [yaml, says] : std::vector<std::pair<std::string, std::string>>{
           {"nodes: [{prefill: 1, devices: [0]}, {decode: 1}]\n",
            "nodes[0].devices: only the cuda engine"},
           {"engine: {kind: cuda}\nnodes: [{prefill: 1, devices: []}, {decode: 1}]\n",
            "a list of 1 to 16 CUDA device indexes"},
           {"engine: {kind: cuda}\nnodes: [{prefill: 1, devices: 3}, {decode: 1}]\n",
            "a list of 1 to 16 CUDA device indexes"},
           {"engine: {kind: cuda}\nnodes: [{prefill: 1, devices: [64]}, {decode: 1}]\n",
            "is not in [0, 63]"},
       }) {
    auto e = error_of(yaml);
    EXPECT_NE(e.find(says), std::string::npos) << yaml << e;
  }
}

TEST(cluster_config, the_fidelity_cluster_loads_as_documented) {
  auto cfg = load_cluster_config(CRESCENT_SOURCE_DIR "/docs/fidelity.cluster.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->model.layers, 4u);
  EXPECT_EQ(cfg->model.d_model, 256u);
  ASSERT_EQ(cfg->nodes.size(), 2u);
  EXPECT_EQ(cfg->nodes[0].prefill_instances, 1u);
  EXPECT_EQ(cfg->nodes[1].decode_instances, 1u);
  EXPECT_EQ(cfg->engine.kind, gpu::engine_kind::reference) << "it runs for real";
}

TEST(cluster_config, the_cuda_cluster_loads_as_documented) {
  auto cfg = load_cluster_config(CRESCENT_SOURCE_DIR "/docs/cuda.cluster.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->engine.kind, gpu::engine_kind::cuda);
  EXPECT_EQ(cfg->engine.device, 0);
  EXPECT_EQ(cfg->nodes.size(), cluster_config{}.nodes.size()) << "the embedded cluster's nodes";
}

TEST(cluster_config, the_documented_example_is_the_default) {
  auto cfg = load_cluster_config(CRESCENT_SOURCE_DIR "/docs/cluster.example.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  cluster_config defaults;
  EXPECT_EQ(cfg->nodes.size(), defaults.nodes.size());
  EXPECT_EQ(cfg->model.fingerprint(), defaults.model.fingerprint());
  EXPECT_EQ(cfg->decode.kv_bytes, defaults.decode.kv_bytes);
  EXPECT_EQ(cfg->prefill.chunk_tokens, defaults.prefill.chunk_tokens);
  EXPECT_EQ(cfg->prefill.load_batch_bytes_max, defaults.prefill.load_batch_bytes_max);
  EXPECT_EQ(cfg->engine.modeled_flops_per_s, defaults.engine.modeled_flops_per_s);
  EXPECT_EQ(cfg->pool.promotion_reserve, defaults.pool.promotion_reserve);
  EXPECT_EQ(cfg->pool.copy_pulled, defaults.pool.copy_pulled);
  EXPECT_EQ(cfg->own_threads, defaults.own_threads);
  EXPECT_EQ(cfg->coupled.batch_max, defaults.coupled.batch_max);
  EXPECT_EQ(cfg->coupled.queue_jobs_max, defaults.coupled.queue_jobs_max);
  EXPECT_EQ(cfg->coupled.chunked_prefill, defaults.coupled.chunked_prefill);
  EXPECT_EQ(cfg->coupled.token_budget, defaults.coupled.token_budget);
  EXPECT_EQ(cfg->coupled.prefix_caching, defaults.coupled.prefix_caching);
  EXPECT_EQ(cfg->conductor.decode_tbt_slack, defaults.conductor.decode_tbt_slack);
  EXPECT_EQ(cfg->connection_heartbeat_ms, defaults.connection_heartbeat_ms);
  EXPECT_EQ(cfg->connection_timeout_ms, defaults.connection_timeout_ms);
  const auto &file = cfg->transfer.engine, &engine = defaults.transfer.engine;
  EXPECT_EQ(file.enable_rdma, engine.enable_rdma);
  EXPECT_EQ(file.rdma_gid_index, engine.rdma_gid_index);
  EXPECT_EQ(file.rdma_qps_per_peer, engine.rdma_qps_per_peer);
  EXPECT_EQ(file.rdma_queue_depth, engine.rdma_queue_depth);
  EXPECT_EQ(file.rdma_qp_timeout, engine.rdma_qp_timeout);
  EXPECT_EQ(file.rdma_retry_count, engine.rdma_retry_count);
  EXPECT_EQ(file.tcp_connections_per_peer, engine.tcp_connections_per_peer);
  EXPECT_EQ(file.slice_bytes, engine.slice_bytes);
  EXPECT_EQ(file.tcp_slice_bytes, engine.tcp_slice_bytes);
  EXPECT_EQ(file.copy_slice_bytes, engine.copy_slice_bytes);
  EXPECT_EQ(file.slice_attempts_max, engine.slice_attempts_max);
  EXPECT_EQ(file.connect_timeout, engine.connect_timeout);
  EXPECT_EQ(file.tcp_peer_silence_max, engine.tcp_peer_silence_max);
}

TEST(cluster_config, missing_file_is_an_error) {
  auto cfg = load_cluster_config("/nonexistent/crescent.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_TRUE(is(cfg.error(), errc::bad_config));
}

} // namespace
} // namespace crescent

namespace crescent {
namespace {

TEST(cluster_config, a_modeled_engine_takes_its_model_from_the_profile) {
  auto cfg = parse_cluster_config(R"(
model: {block_tokens: 512, context_tokens_max: 262144}
engine: {kind: modeled, profile: llama3-70b-8xa800}
nodes:
  - {prefill: 1, pool_tokens: 3000000}
  - {decode: 1, pool_tokens: 3000000}
decode: {kv_tokens: 1000000, request_tokens_max: 262144}
)",
                                  "m.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(cfg->engine.kind, gpu::engine_kind::modeled);
  EXPECT_EQ(cfg->engine.timing, gpu::timing_mode::modeled);
  ASSERT_TRUE(cfg->engine.profile);
  EXPECT_EQ(cfg->engine.profile->name, "llama3-70b-8xa800");
  EXPECT_EQ(cfg->model.layers, 80u);
  EXPECT_EQ(cfg->model.kv_element_bytes, 2u);
  EXPECT_EQ(cfg->model.kv_bytes_per_token(), 327680u) << "LLaMA3-70B: 320 KB per token";
  // 3M tokens are 5859 whole blocks of 512.
  EXPECT_EQ(pool_bytes_of(*cfg, 0), 5859ull * cfg->model.page_bytes());
  EXPECT_EQ(decode_kv_bytes_of(*cfg), 1953ull * cfg->model.page_bytes());
  auto links = link_profile_of(*cfg);
  EXPECT_EQ(links.nic_bytes_per_s, 100'000'000'000u);
  EXPECT_EQ(links.bytes_scale, cfg->model.page_bytes() / (64 * 80)) << "64 bytes a layer";
}

TEST(cluster_config, a_modeled_engine_is_checked_against_its_profile) {
  auto e = error_of("model: {layers: 79}\nengine: {kind: modeled, profile: llama3-70b-8xa800}\n");
  EXPECT_NE(e.find("c.yaml:1: model.layers (79) differs from profile llama3-70b-8xa800's 80"),
            std::string::npos)
      << e;
  e = error_of("engine: {kind: modeled, profile: llama3-70b-8xa800, timing: measured}\n");
  EXPECT_NE(e.find("engine.timing"), std::string::npos) << e;
  e = error_of("engine: {kind: modeled}\n");
  EXPECT_NE(e.find("needs a profile"), std::string::npos) << e;
  e = error_of("engine: {profile: llama3-70b-8xa800}\n");
  EXPECT_NE(e.find("only the modeled engine"), std::string::npos) << e;
  e = error_of("engine: {kind: modeled, profile: no-such-gpu}\n");
  EXPECT_NE(e.find("llama3-70b-8xa800"), std::string::npos) << "names the built-in ones: " << e;
  e = error_of("engine: {kind: simulated}\n");
  EXPECT_NE(e.find("c.yaml:1"), std::string::npos) << e;
  {
    // A profile without a drive: the A800's, its SSD lines left out.
    std::istringstream in{builtin_profile_text("llama3-70b-8xa800")};
    std::string line, text;
    while (std::getline(in, line))
      if (line.find("ssd_") == std::string::npos)
        text += line + "\n";
    const auto path = ::testing::TempDir() + "no_drive.yaml";
    std::ofstream{path} << text;
    e = error_of("engine: {kind: modeled, profile: " + path +
                 "}\nnodes: [{prefill: 1, pool_tokens: 100000, ssd_tokens: 100000}, "
                 "{decode: 1, pool_tokens: 100000}]\ndecode: {kv_tokens: 100000}\n");
    EXPECT_NE(e.find("nodes[0].ssd_tokens: an SSD tier needs the profile's SSD"), std::string::npos)
        << e;
  }
  e = error_of("model: {layers: 80}\n");
  EXPECT_NE(e.find("model.layers (80) must be in [1, 64] for the reference engine"),
            std::string::npos)
      << e;
  e = error_of("model: {kv_element_bytes: 2}\n");
  EXPECT_NE(e.find("reference engine"), std::string::npos) << e;
}

TEST(cluster_config, a_modeled_ssd_tier_takes_its_times_from_the_profile) {
  auto cfg = parse_cluster_config("engine: {kind: modeled, profile: llama3-70b-8xa800}\n"
                                  "nodes: [{prefill: 1, pool_tokens: 100000, ssd_tokens: 400000}, "
                                  "{decode: 1, pool_tokens: 100000, ssd_mib: 1048576}]\n"
                                  "decode: {kv_tokens: 100000}\n",
                                  "c.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  EXPECT_EQ(ssd_bytes_of(*cfg, 0), 400'000 / cfg->model.block_tokens * cfg->model.page_bytes());
  EXPECT_EQ(ssd_bytes_of(*cfg, 1), uint64_t{1} << 40);
  auto links = link_profile_of(*cfg);
  EXPECT_EQ(links.ssd_read_bytes_per_s, 7'000'000'000u);
  EXPECT_EQ(links.ssd_write_bytes_per_s, 3'800'000'000u);
  EXPECT_EQ(links.ssd_latency_ns, 100'000u);
  // It prints as it reads.
  auto again = parse_cluster_config(format_cluster_config(*cfg), "again.yaml");
  ASSERT_TRUE(again) << describe(again.error());
  EXPECT_EQ(again->nodes[0].ssd_tokens, 400'000u);
  EXPECT_EQ(ssd_bytes_of(*again, 1), uint64_t{1} << 40);
}

TEST(cluster_config, every_built_in_profile_loads) {
  auto names = builtin_profile_names();
  EXPECT_GE(names.size(), 2u);
  for (const auto& name : names) {
    auto p = load_profile(name);
    ASSERT_TRUE(p) << name << ": " << describe(p.error());
    EXPECT_EQ((*p)->name, name) << "a profile's name is its file's";
  }
}

TEST(cluster_config, profile_errors_name_the_line_and_field) {
  auto text = builtin_profile_text("llama3-70b-8xa800");
  ASSERT_FALSE(text.empty());
  auto bad = text;
  bad.replace(bad.find("prefill_mfu: 0.5"), 16, "prefill_mfu: 2.5");
  auto p = parse_profile(bad, "p.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(describe(p.error()).find("profile.prefill_mfu"), std::string::npos)
      << describe(p.error());
  // The range check names the line of the value it refuses.
  size_t line = 1;
  for (size_t i = 0; i < bad.find("prefill_mfu: 2.5"); ++i)
    line += bad[i] == '\n' ? 1 : 0;
  EXPECT_NE(describe(p.error()).find("p.yaml:" + std::to_string(line) + ": "), std::string::npos)
      << describe(p.error());
  p = parse_profile(text + "fit: {prefill_base_ns: 1}\n", "p.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(describe(p.error()).find("fit.prefill_per_token_ns: missing"), std::string::npos)
      << describe(p.error());
  p = parse_profile(text + "extra: 1\n", "p.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(describe(p.error()).find("extra: unknown field"), std::string::npos);
  auto typo = text;
  typo.replace(typo.find("gpus: 8"), 7, "gpus: eight");
  p = parse_profile(typo, "p.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(describe(p.error()).find("machine.gpus"), std::string::npos) << describe(p.error());
  EXPECT_NE(describe(p.error()).find("p.yaml:"), std::string::npos) << describe(p.error());
  // An SSD is all of it or none: a drive that writes at 0 bytes a second is no drive.
  auto half = text;
  half.replace(half.find("ssd_write_bytes_per_s: 3.8e9"), 28, "ssd_write_bytes_per_s: 0");
  p = parse_profile(half, "p.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(describe(p.error()).find("profile.ssd_write_bytes_per_s"), std::string::npos)
      << describe(p.error());
}

TEST(cluster_config, a_profile_reads_its_warmup_after_idle) {
  auto text = builtin_profile_text("reference-cpu");
  ASSERT_FALSE(text.empty());
  auto p = parse_profile(text + "warmup:\n  idle_ms: [5, 50]\n  prefill_extra_ns: [0, 1e6]\n"
                                "  decode_extra_ns: [1000, 2e6]\n",
                         "p.yaml");
  ASSERT_TRUE(p) << describe(p.error());
  EXPECT_EQ((*p)->warmup_idle_ms, (std::vector<double>{5, 50}));
  EXPECT_EQ((*p)->decode_warmup_ns, (std::vector<double>{1000, 2e6}));
  p = parse_profile(text + "warmup:\n  idle_ms: 5\n", "p.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(describe(p.error()).find("warmup.idle_ms: expected a list of numbers"),
            std::string::npos)
      << describe(p.error());
  p = parse_profile(text + "warmup:\n  idle_ms: [50, 5]\n  prefill_extra_ns: [0, 0]\n"
                           "  decode_extra_ns: [0, 0]\n",
                    "p.yaml");
  ASSERT_FALSE(p);
  EXPECT_NE(describe(p.error()).find("warmup.idle_ms: must increase"), std::string::npos)
      << describe(p.error());
  EXPECT_NE(describe(p.error()).find("p.yaml:"), std::string::npos) << describe(p.error());
}

} // namespace
} // namespace crescent
