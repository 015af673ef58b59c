// `crescent experiment`: each experiment run on a small trace, its JSON checked against its
// figure's invariants (a capacity curve that rises to the sequence-only maximum, shares in
// [0, 1], every policy, split and mode present); the same seed gives the same JSON, byte for
// byte; the registry names each experiment once.
//
// The small trace: 48 requests in 6 groups that share an 8-block prefix each (a system prompt),
// then 4 blocks of their own, arriving every 250 ms with the groups taking turns. The paper
// cluster's memory (pools, decode KV, prefill pages for two prompts of the longest context:
// 0.6 GB of page stand-ins, allocated and prefaulted, most of a small run's time otherwise) is
// cut to what this trace can fill, and its longest context to 16k tokens (the trace's prompts
// have 6k): nothing is evicted and no decode instance fills.
#include "apps/experiment/experiment.hpp"
#include "apps/experiment/output.hpp"
#include "apps/experiment/progress.hpp"
#include "apps/experiment/registry.hpp"
#include "apps/sim/paper_cluster.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

namespace crescent::experiment {
namespace {

constexpr uint32_t groups = 6, per_group = 8, shared_blocks = 8, own_blocks = 4;

std::vector<replay::trace_record> small_trace() {
  std::vector<replay::trace_record> out;
  for (uint32_t i = 0; i < groups * per_group; ++i) {
    replay::trace_record r;
    r.line = i + 1;
    r.timestamp_ms = 250 * i;
    const uint32_t group = i % groups;
    for (uint32_t b = 0; b < shared_blocks; ++b)
      r.hash_ids.push_back(1000 * group + b);
    for (uint32_t b = 0; b < own_blocks; ++b)
      r.hash_ids.push_back(100'000 + 10 * i + b);
    r.input_tokens = static_cast<uint32_t>(r.hash_ids.size()) * replay::trace_block_tokens - 100;
    r.output_tokens = 20;
    out.push_back(std::move(r));
  }
  return out;
}

const std::vector<replay::trace_record>& trace() {
  static const auto t = small_trace();
  return t;
}

// The paper cluster with pools and decode memory for all of the trace's blocks and tokens.
cluster_config small_memory_paper_cluster() {
  auto cfg = sim::paper_cluster();
  EXPECT_TRUE(cfg);
  uint64_t blocks = 0, tokens = 0;
  for (const auto& r : trace()) {
    blocks += r.hash_ids.size();
    tokens += r.input_tokens + r.output_tokens;
  }
  // The pools evict past 90% full.
  const uint64_t pool =
      (blocks * replay::trace_block_tokens) * 10 / 9 + 4 * replay::trace_block_tokens;
  for (auto& n : cfg->nodes) {
    EXPECT_GE(n.pool_tokens, pool);
    n.pool_tokens = pool;
  }
  cfg->model.context_tokens_max = 16384;
  cfg->decode.request_tokens_max = cfg->model.context_tokens_max;
  cfg->decode.kv_tokens = std::max<uint64_t>(tokens, cfg->decode.request_tokens_max);
  EXPECT_FALSE(validate(*cfg));
  return *cfg;
}

std::string run_json(std::string_view name, uint64_t seed) {
  const auto* e = find_experiment(name);
  EXPECT_NE(e, nullptr) << name;
  if (e == nullptr)
    return "{}";
  progress bar{false, 1, e->planned_runs(trace())};
  context ctx{trace(), "small test trace", seed, bar, small_memory_paper_cluster()};
  auto r = e->run(ctx);
  if (!r) {
    ADD_FAILURE() << name << ": " << describe(r.error());
    return "{}";
  }
  run_info info{"crescent experiment " + std::string{name},
                "test",
                "small test trace",
                trace().size(),
                seed,
                ctx.wall_s()};
  return format_json(*e, *r, info);
}

// Each experiment runs once (seed 1) for all the tests that read it.
const std::string& json_of(std::string_view name) {
  static std::map<std::string, std::string, std::less<>> cache;
  auto i = cache.find(name);
  if (i == cache.end())
    i = cache.emplace(std::string{name}, run_json(name, 1)).first;
  return i->second;
}

const json& results_of(std::string_view name) {
  static std::map<std::string, json, std::less<>> cache;
  auto i = cache.find(name);
  if (i == cache.end())
    i = cache.emplace(std::string{name}, json::parse(json_of(name))).first;
  return i->second["results"];
}

void expect_share(double x, const std::string& what) {
  EXPECT_GE(x, 0) << what;
  EXPECT_LE(x, 1) << what;
}

void expect_summary(const json& s, size_t requests) {
  EXPECT_EQ(s["requests"].get<size_t>(), requests);
  EXPECT_EQ(s["completed"].get<size_t>() + s["rejected"].get<size_t>() + s["failed"].get<size_t>(),
            requests);
  EXPECT_EQ(s["failed"].get<size_t>(), 0u);
  expect_share(s["hit_rate"].get<double>(), "hit rate");
  expect_share(s["hit_rate_remote"].get<double>(), "remote hit rate");
  EXPECT_LE(s["hit_rate_remote"].get<double>(), s["hit_rate"].get<double>());
  for (const auto& [tbt, n] : s["effective_by_tbt_ms"].items())
    EXPECT_LE(n.get<size_t>(), s["completed"].get<size_t>()) << tbt;
  EXPECT_LE(s["ttft_ms"]["p50"].get<double>(), s["ttft_ms"]["p90"].get<double>());
}

TEST(experiment, capacity_curves_rise_with_capacity_to_the_sequence_only_maximum) {
  const auto& r = results_of("capacity");
  const auto caps = r["capacity_tokens"].get<std::vector<uint64_t>>();
  const auto seq = r["sequence_only"].get<std::vector<double>>();
  const auto rep = r["replayed"].get<std::vector<double>>();
  ASSERT_EQ(caps.front(), 10'000u);
  ASSERT_EQ(caps.back(), 1'000'000'000u);
  ASSERT_EQ(seq.size(), caps.size());
  ASSERT_EQ(rep.size(), caps.size());
  const double max = r["max_sequence_only"].get<double>();
  EXPECT_GT(max, 0.4) << "8 of 12 blocks shared by 7 of 8 requests of a group";
  for (size_t i = 0; i < caps.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(caps[i - 1], caps[i]);
      EXPECT_LE(seq[i - 1], seq[i]) << caps[i];
      EXPECT_LE(rep[i - 1], rep[i]) << caps[i];
    }
    EXPECT_LE(seq[i], max);
    // The replay's pool evicts in LRU order at the capacity, as the analysis assumes, where a
    // prompt's 12 blocks fit in the cache (the smallest holds 19).
    EXPECT_NEAR(rep[i], seq[i], 1e-4) << caps[i];
  }
  EXPECT_DOUBLE_EQ(seq.back(), max) << "10^9 tokens hold the whole trace";
  EXPECT_DOUBLE_EQ(r["max_replayed"].get<double>(), max);
  EXPECT_LT(seq.front(), max) << "10^4 tokens hold under 20 blocks";
}

TEST(experiment, the_global_pool_hits_at_least_as_often_as_local_caches) {
  const auto& r = results_of("local-vs-global");
  EXPECT_EQ(r["prefill_nodes"].get<int>(), 10);
  for (const char* side : {"local", "global"}) {
    expect_summary(r[side]["summary"], trace().size());
    expect_share(r[side]["hit_rate"].get<double>(), side);
    EXPECT_GT(r[side]["prefill_gpu_s_mean"].get<double>(), 0) << side;
  }
  EXPECT_EQ(r["local"]["hit_rate_remote"].get<double>(), 0) << "local caches read no other node";
  EXPECT_GE(r["global"]["hit_rate"].get<double>(), r["local"]["hit_rate"].get<double>());
  // Local caches placed by load: no other node read, and no more hits than where prefixes are
  // looked for.
  const auto& by_load = r["local_by_load"];
  expect_summary(by_load["summary"], trace().size());
  EXPECT_EQ(by_load["policy"], "least_loaded");
  EXPECT_EQ(by_load["hit_rate_remote"].get<double>(), 0);
  EXPECT_LE(by_load["hit_rate"].get<double>(), r["global"]["hit_rate"].get<double>());
  EXPECT_LE(by_load["hit_rate"].get<double>(), r["local"]["hit_rate"].get<double>());
  EXPECT_LE(r["global"]["prefill_gpu_s_mean"].get<double>(),
            r["local"]["prefill_gpu_s_mean"].get<double>());
  // The same pair at the paper cluster's caches and three smaller ones, largest first.
  const auto& by = r["by_cache"];
  ASSERT_EQ(by.size(), 4u);
  EXPECT_EQ(by[0]["global"]["hit_rate"], r["global"]["hit_rate"]);
  for (size_t i = 0; i < by.size(); ++i) {
    if (i > 0) {
      EXPECT_LT(by[i]["cache_tokens_per_node"].get<uint64_t>(),
                by[i - 1]["cache_tokens_per_node"].get<uint64_t>());
    }
    for (const char* side : {"local", "global"})
      expect_share(by[i][side]["hit_rate"].get<double>(), side);
    EXPECT_EQ(by[i]["local"]["hit_rate_remote"].get<double>(), 0) << i;
  }
}

TEST(experiment, every_policy_has_its_ttft) {
  const auto& r = results_of("policies");
  std::set<std::string> names;
  for (const auto& p : r["policies"]) {
    names.insert(p["policy"].get<std::string>());
    EXPECT_GT(p["ttft_ms_mean"].get<double>(), 0);
    EXPECT_GE(p["ttft_ms_p90"].get<double>(), p["summary"]["ttft_ms"]["p50"].get<double>());
    expect_summary(p["summary"], trace().size());
    EXPECT_EQ(p["summary"]["rejected"].get<size_t>(), 0u) << "admission none";
  }
  EXPECT_EQ(names, (std::set<std::string>{"random", "least_loaded", "local_cache_aware",
                                          "global_cache_aware", "block_cost"}));
  EXPECT_EQ(r["policies"][3]["paper_ttft_s_mean"].get<double>(), 3.07);
}

TEST(experiment, replica_curves_follow_the_blocks_by_use) {
  const auto& r = results_of("replicas");
  const auto times = r["time_s"].get<std::vector<double>>();
  ASSERT_GT(times.size(), 2u);
  EXPECT_TRUE(std::is_sorted(times.begin(), times.end()));
  ASSERT_GE(r["blocks"].size(), 2u) << "the trace uses over 100 blocks";
  uint32_t previous_uses = UINT32_MAX;
  size_t previous_rank = 0;
  for (const auto& b : r["blocks"]) {
    EXPECT_GT(b["rank"].get<size_t>(), previous_rank);
    previous_rank = b["rank"].get<size_t>();
    EXPECT_LE(b["uses"].get<uint32_t>(), previous_uses);
    previous_uses = b["uses"].get<uint32_t>();
    const auto replicas = b["replicas"].get<std::vector<uint32_t>>();
    ASSERT_EQ(replicas.size(), times.size());
    EXPECT_EQ(replicas.front(), 0u) << "nothing is stored before the first request";
    for (auto n : replicas)
      EXPECT_LE(n, 8u) << "only the 8 prefill nodes hold blocks";
    EXPECT_GE(b["replicas_max"].get<uint32_t>(), 1u) << "every block used is stored";
  }
  // The 10th most used block is a shared prefix block: 8 requests use it.
  EXPECT_EQ(r["blocks"][0]["uses"].get<uint32_t>(), per_group);
}

TEST(experiment, bandwidth_points_cover_24_to_400_gbps) {
  const auto& r = results_of("bandwidth");
  ASSERT_EQ(r["points"].size(), 5u);
  EXPECT_EQ(r["points"][0]["nic_gbps"].get<double>(), 24);
  EXPECT_EQ(r["points"][4]["nic_gbps"].get<double>(), 400);
  for (const auto& p : r["points"]) {
    expect_summary(p["summary"], trace().size());
    EXPECT_LE(p["effective"].get<size_t>(), trace().size());
  }
  // The same requests over slower links: the first tokens come later.
  EXPECT_GT(r["points"][0]["ttft_ms_mean"].get<double>(),
            r["points"][4]["ttft_ms_mean"].get<double>());
}

TEST(experiment, pd_ratio_splits_all_16_nodes_at_both_rates) {
  const auto& r = results_of("pd-ratio");
  std::set<std::pair<uint32_t, double>> seen;
  for (const auto& p : r["points"]) {
    EXPECT_EQ(p["prefill_nodes"].get<uint32_t>() + p["decode_nodes"].get<uint32_t>(), 16u);
    seen.emplace(p["prefill_nodes"].get<uint32_t>(), p["speedup"].get<double>());
    expect_summary(p["summary"], trace().size());
    EXPECT_LE(p["effective"].get<size_t>(), trace().size());
  }
  EXPECT_EQ(seen.size(), 14u);
}

TEST(experiment, overload_runs_every_admission_mode_at_three_loads) {
  const auto& r = results_of("overload");
  const double sustained = r["sustained_speedup"].get<double>();
  EXPECT_GT(sustained, 0);
  std::set<std::pair<std::string, double>> seen;
  for (const auto& p : r["points"]) {
    seen.emplace(p["admission"].get<std::string>(), p["load_multiple"].get<double>());
    EXPECT_DOUBLE_EQ(p["speedup"].get<double>(), sustained * p["load_multiple"].get<double>());
    const auto requests = p["requests"].get<size_t>();
    EXPECT_EQ(requests, trace().size());
    EXPECT_LE(p["placed"].get<size_t>(), requests);
    EXPECT_LE(p["effective"].get<size_t>(), p["placed"].get<size_t>());
    expect_share(p["attainment_of_placed"].get<double>(), "attainment");
    if (p["admission"] == "none") {
      EXPECT_EQ(p["placed"].get<size_t>(), requests) << "none places everything";
    }
    const auto& load = p["decode_load"];
    ASSERT_EQ(load["time_s"].size(), load["kv_tokens"].size());
    ASSERT_EQ(load["time_s"].size(), load["requests"].size());
    EXPECT_GT(*std::max_element(load["requests"].begin(), load["requests"].end()), 0);
  }
  EXPECT_EQ(seen.size(), 9u);
}

TEST(experiment, scale_multiplies_nodes_and_requests_alike) {
  const auto& r = results_of("scale");
  ASSERT_EQ(r["points"].size(), 3u);
  for (const auto& p : r["points"]) {
    const auto nodes = p["nodes"].get<uint32_t>();
    EXPECT_EQ(p["trace_copies"].get<uint32_t>(), nodes / 16);
    expect_summary(p["summary"], trace().size() * (nodes / 16));
  }
  EXPECT_EQ(r["points"][2]["nodes"].get<uint32_t>(), 256u) << "the cluster's limit";
}

TEST(experiment, effective_shares_rise_with_the_tbt_threshold_for_all_four_systems) {
  const auto& r = results_of("effective-capacity");
  ASSERT_EQ(r["thresholds_ms"].size(), 9u);
  EXPECT_EQ(r["thresholds_ms"][0].get<double>(), 50);
  EXPECT_EQ(r["thresholds_ms"][8].get<double>(), 1000);
  ASSERT_EQ(r["rates"].size(), 2u);
  EXPECT_EQ(r["rates"][1]["speedup"].get<double>(), 1.5);
  for (const auto& rate : r["rates"]) {
    ASSERT_EQ(rate["systems"].size(), 4u);
    std::set<std::string> names;
    for (const auto& s : rate["systems"]) {
      names.insert(s["system"].get<std::string>());
      double before = 0;
      for (const auto& x : s["shares"]) {
        expect_share(x.get<double>(), s["system"].get<std::string>());
        EXPECT_GE(x.get<double>(), before) << s["system"];
        before = x.get<double>();
      }
      expect_summary(s["summary"], trace().size());
    }
    EXPECT_EQ(names, (std::set<std::string>{"crescent", "coupled", "coupled_prefix_caching",
                                            "coupled_chunked_prefill"}));
  }
}

TEST(experiment, prefill_time_covers_all_four_systems) {
  const auto& r = results_of("prefill-time");
  ASSERT_EQ(r["systems"].size(), 4u);
  for (const auto& s : r["systems"]) {
    EXPECT_GT(s["prefill_gpu_s_mean"].get<double>(), 0) << s["system"];
    EXPECT_GT(s["paper_ratio_to_mooncake"].get<double>(), 0) << s["system"];
    expect_summary(s["summary"], trace().size());
  }
  EXPECT_EQ(r["systems"][0]["system"], "crescent");
  // The small trace's groups share a prefix: prefix caching computes less than plain coupled.
  EXPECT_LT(r["systems"][2]["prefill_gpu_s_mean"].get<double>(),
            r["systems"][1]["prefill_gpu_s_mean"].get<double>());
}

TEST(experiment, compression_runs_every_codec_at_both_pool_sizes) {
  const auto& r = results_of("compression");
  const std::vector<std::string> codecs{"none",     "int8",  "kivi4",    "kvquant4",
                                        "kvquant3", "kivi2", "none x3.5"};
  ASSERT_EQ(r["runs"].size(), 2 * codecs.size());
  for (size_t i = 0; i < r["runs"].size(); ++i) {
    const auto& run = r["runs"][i];
    EXPECT_EQ(run["codec"], codecs[i % codecs.size()]);
    expect_summary(run["summary"], trace().size());
  }
  // The short pool (its second half): every codec holds at least what none holds, and 2-bit
  // KIVI's blocks, 6.4 times smaller, at least what 4-bit ones hold.
  const auto hit = [&](size_t i) { return r["runs"][i]["summary"]["hit_rate"].get<double>(); };
  const size_t s = codecs.size();
  for (size_t k = 1; k + 1 < s; ++k)
    EXPECT_GE(hit(s + k), hit(s)) << codecs[k];
  EXPECT_GE(hit(s + 5), hit(s + 3));
  EXPECT_GT(r["runs"][5]["ratio_vs_fp16"].get<double>(), 6.0);
  ASSERT_EQ(r["analysis"].size(), 4u);
}

TEST(experiment, the_same_seed_gives_the_same_json_byte_for_byte) {
  const auto& first = json_of("local-vs-global");
  EXPECT_EQ(run_json("local-vs-global", 1), first);
  EXPECT_EQ(json::parse(first)["seed"].get<uint64_t>(), 1u);
  EXPECT_EQ(json::parse(first)["command"].get<std::string>(),
            "crescent experiment local-vs-global");
}

TEST(experiment, the_registry_names_each_experiment_once) {
  std::set<std::string> names;
  for (const auto& e : experiments()) {
    EXPECT_TRUE(names.insert(std::string{e->name()}).second) << e->name();
    EXPECT_FALSE(e->description().empty());
    EXPECT_FALSE(e->figure().empty());
  }
  EXPECT_EQ(names, (std::set<std::string>{"capacity", "local-vs-global", "policies", "replicas",
                                          "bandwidth", "pd-ratio", "overload", "effective-capacity",
                                          "prefill-time", "scale", "compression"}));
  EXPECT_EQ(find_experiment("all"), nullptr);
}

} // namespace
} // namespace crescent::experiment
