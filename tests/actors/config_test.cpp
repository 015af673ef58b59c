#include "actors/cluster/cluster_config.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

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
prefill: {chunk_tokens: 32, queue_jobs_max: 10}
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

TEST(cluster_config, the_documented_example_is_the_default) {
  auto cfg = load_cluster_config(CRESCENT_SOURCE_DIR "/docs/cluster.example.yaml");
  ASSERT_TRUE(cfg) << describe(cfg.error());
  cluster_config defaults;
  EXPECT_EQ(cfg->nodes.size(), defaults.nodes.size());
  EXPECT_EQ(cfg->model.fingerprint(), defaults.model.fingerprint());
  EXPECT_EQ(cfg->decode.kv_bytes, defaults.decode.kv_bytes);
  EXPECT_EQ(cfg->prefill.chunk_tokens, defaults.prefill.chunk_tokens);
  EXPECT_EQ(cfg->engine.modeled_flops_per_s, defaults.engine.modeled_flops_per_s);
  EXPECT_EQ(cfg->pool.promotion_reserve, defaults.pool.promotion_reserve);
}

TEST(cluster_config, missing_file_is_an_error) {
  auto cfg = load_cluster_config("/nonexistent/crescent.yaml");
  ASSERT_FALSE(cfg);
  EXPECT_TRUE(is(cfg.error(), errc::bad_config));
}

} // namespace
} // namespace crescent
