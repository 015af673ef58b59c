// A chaos campaign (apps/chaos): every seed's drawn plan holds every invariant. The default suite
// runs 50 seeds of 10 requests; the `slow` one (crescent_chaos_campaign_slow_tests) runs issue
// 20's campaign, 1,000 seeds of 200 requests, in one process.
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

} // namespace
} // namespace crescent::chaos
