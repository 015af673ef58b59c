// A chaos campaign (apps/chaos): every seed's drawn plan holds every invariant. The default suite
// runs 50 seeds of 10 requests; the `slow` one (crescent_chaos_campaign_slow_tests) runs issue
// 20's campaign, 1,000 seeds of 200 requests, in one process, and checks that the campaign
// docs/faults.md names reaches every rare path the sources mark (actors/common/code_probe.hpp).
#include "actors/common/code_probe.hpp"
#include "apps/chaos/chaos_command.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#ifndef CRESCENT_CHAOS_SEEDS
#define CRESCENT_CHAOS_SEEDS 50
#endif
#ifndef CRESCENT_CHAOS_REQUESTS
#define CRESCENT_CHAOS_REQUESTS 10
#endif
#ifndef CRESCENT_CHAOS_FIRST
#define CRESCENT_CHAOS_FIRST 100
#endif

namespace crescent::chaos {
namespace {

TEST(chaos, a_campaign_holds_every_invariant) {
  chaos_options opt;
  opt.requests = CRESCENT_CHAOS_REQUESTS;
  opt.trace_path = CRESCENT_DATA_DIR "/synthetic_trace.jsonl";
  auto c = prepare_campaign(opt);
  ASSERT_TRUE(c) << describe(c.error());
  for (uint64_t seed = CRESCENT_CHAOS_FIRST; seed < CRESCENT_CHAOS_FIRST + CRESCENT_CHAOS_SEEDS;
       ++seed) {
    auto r = run_seed(*c, seed);
    std::string why;
    for (const auto& v : r.violations)
      why += v + "\n";
    EXPECT_TRUE(r.held()) << "seed " << seed << ": run it alone with "
                          << reproduce_command(c->options, seed) << "\n"
                          << why << r.faults_log;
  }
}

#ifdef CRESCENT_CHAOS_PROBE_CAMPAIGN
// The documented campaigns that together reach every code probe: a rare path marked in the
// sources that no seed of them reaches fails here, to be exercised (a budget, a cluster) or
// unmarked. The prefill groups under the extreme budget reach all but the deadline, which no
// request of theirs or of coupled instances reaches since the requests' and the heads' watches
// (a group's lost StageDone, a coupled instance's lost tokens reached it before); the cluster
// with a 10 s deadline reaches it. A prefill job that comes after its attempt's cancel needs
// retries (only a failed attempt cancels before its first token): seeds 95000 to 95004 of the
// retries cluster.
TEST(chaos, the_documented_campaigns_reach_every_rare_path_the_sources_mark) {
  std::vector<uint64_t> seeds(std::size(code_probes));
  auto run = [&](const char* cluster, uint64_t first, uint64_t count) {
    chaos_options opt;
    opt.requests = 200;
    opt.trace_path = CRESCENT_DATA_DIR "/synthetic_trace.jsonl";
    opt.cluster_path = std::string{CRESCENT_DOCS_DIR "/chaos/"} + cluster;
    opt.budget_path = CRESCENT_DOCS_DIR "/chaos/extreme.budget.yaml";
    auto c = prepare_campaign(opt);
    ASSERT_TRUE(c) << describe(c.error());
    for (uint64_t seed = first; seed < first + count; ++seed) {
      auto r = run_seed(*c, seed);
      EXPECT_TRUE(r.held()) << "seed " << seed << ": " << reproduce_command(c->options, seed);
      for (size_t i = 0; i < r.probes.size(); ++i)
        seeds[i] += r.probes[i] ? 1 : 0;
    }
  };
  run("cpp.cluster.yaml", 91000, 100);
  run("coupled.cluster.yaml", 91000, 20);
  run("deadline.cluster.yaml", 91000, 5);
  run("retries.cluster.yaml", 95000, 5);
  for (size_t i = 0; i < seeds.size(); ++i)
    EXPECT_GT(seeds[i], 0u) << "no seed reached " << code_probes[i].name << ": "
                            << code_probes[i].marks;
}
#endif

} // namespace
} // namespace crescent::chaos
