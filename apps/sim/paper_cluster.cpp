#include "apps/sim/paper_cluster.hpp"

#include "actors/cluster/profile_yaml.hpp"

#include <array>
#include <cmath>
#include <string_view>

namespace crescent::sim {

caf::expected<cluster_config> paper_cluster() {
  auto profile = load_profile(paper_profile);
  if (!profile)
    return std::move(profile.error());
  cluster_config c;
  c.model = gpu::model_of(**profile, 512, 262144);
  c.engine.kind = gpu::engine_kind::modeled;
  c.engine.timing = gpu::timing_mode::modeled;
  c.engine.profile_name = paper_profile;
  c.engine.profile = *profile;
  c.nodes.assign(16, node_config{});
  for (uint32_t i = 0; i < 16; ++i) {
    c.nodes[i].prefill_instances = i < 8 ? 1 : 0;
    c.nodes[i].decode_instances = i < 8 ? 0 : 1;
    c.nodes[i].pool_tokens = 3'000'000;
  }
  c.prefill.chunk_tokens = 8192;
  c.prefill.queue_jobs_max = 1024;
  c.prefill.stream_layers = 8;
  c.decode.kv_tokens = static_cast<uint64_t>(
      std::floor((*profile)->kv_capacity_bytes() / double(c.model.kv_bytes_per_token())));
  c.decode.batch_max = 256;
  c.decode.request_tokens_max = c.model.context_tokens_max;
  c.trace_block_tokens = 512;   // prompts at the trace's lengths
  c.store.sync_commits = false; // a simulation's metadata need not survive a crash
  c.simulated_time = true;
  c.access_key_seed = 1;
  if (auto err = validate(c))
    return err;
  return c;
}

caf::expected<cluster_config> paper_coupled_cluster(bool chunked_prefill, bool prefix_caching,
                                                    policy_kind routing) {
  auto c = paper_cluster();
  if (!c)
    return c;
  return as_coupled(std::move(*c), chunked_prefill, prefix_caching, routing);
}

caf::expected<cluster_config> as_coupled(cluster_config c, bool chunked_prefill,
                                         bool prefix_caching, policy_kind routing) {
  c.coupled.kv_tokens = decode_kv_bytes_of(c) / c.model.page_bytes() * c.model.block_tokens;
  for (auto& n : c.nodes) {
    const auto address = n.address;
    n = node_config{};
    n.coupled_instances = 1;
    n.pool_tokens = c.model.block_tokens; // a pool coupled instances never use
    n.address = address;
  }
  c.coupled.batch_max = c.decode.batch_max;
  c.coupled.queue_jobs_max = c.prefill.queue_jobs_max;
  c.coupled.chunked_prefill = chunked_prefill;
  c.coupled.prefix_caching = prefix_caching;
  c.conductor.policy = routing;
  c.conductor.admission = admission_mode::none;
  if (auto err = validate(c))
    return err;
  return c;
}

bool parse_coupled_mode(std::string_view name, bool& chunked_prefill, bool& prefix_caching) {
  struct mode {
    std::string_view name;
    bool chunked, caching;
  };
  constexpr std::array<mode, 4> modes{{{"prefill-first", false, false},
                                       {"chunked-prefill", true, false},
                                       {"prefix-caching", false, true},
                                       {"chunked-prefix-caching", true, true}}};
  for (const auto& m : modes)
    if (m.name == name) {
      chunked_prefill = m.chunked;
      prefix_caching = m.caching;
      return true;
    }
  return false;
}

caf::expected<cluster_config> one_pool_node_cluster(uint64_t capacity_tokens) {
  auto c = paper_cluster();
  if (!c)
    return c;
  c->nodes.resize(1);
  c->nodes[0].prefill_instances = 1;
  c->nodes[0].decode_instances = 1;
  if (capacity_tokens == 0) {
    c->nodes[0].pool_tokens = uint64_t{1} << 28; // beyond any trace here: no eviction
  } else {
    c->nodes[0].pool_tokens = 2 * (capacity_tokens / c->model.block_tokens) * c->model.block_tokens;
    c->pool.high_watermark = 0.5;
    c->pool.evict_fraction = 0;
  }
  // Every request, however long its prefill: the check is of the pool, not of the SLOs.
  c->conductor.admission = admission_mode::none;
  if (auto err = validate(*c))
    return err;
  return c;
}

} // namespace crescent::sim
