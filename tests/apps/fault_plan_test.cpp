// Fault plans of `crescent up` (apps/up/fault_plan.hpp): every field read, every bad value named
// with its line, and the checks against the cluster.
#include "apps/up/fault_plan.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

namespace crescent::up {
namespace {

std::string error_of(const std::string& yaml) {
  auto plan = parse_fault_plan(yaml, "p.yaml");
  EXPECT_FALSE(plan) << "accepted:\n" << yaml;
  return plan ? std::string{} : crescent::describe(plan.error());
}

cluster_config four_nodes() {
  cluster_config cfg; // nodes 0, 1 prefill; 2, 3 decode
  cfg.nodes[1].address = "127.0.0.1:7001";
  cfg.nodes[2].address = "127.0.0.1:7002";
  return cfg;
}

TEST(fault_plan, reads_kills_and_pauses_in_time_order) {
  auto plan = parse_fault_plan("faults:\n"
                               "  - {at_ms: 900, kill: 2}\n"
                               "  - {at_ms: 100, pause: 1, for_ms: 500}\n",
                               "p.yaml");
  ASSERT_TRUE(plan) << crescent::describe(plan.error());
  ASSERT_EQ(plan->faults.size(), 2u);
  EXPECT_EQ(plan->faults[0].kind, fault_kind::pause);
  EXPECT_EQ(plan->faults[0].node, 1u);
  EXPECT_EQ(plan->faults[0].at_ms, 100u);
  EXPECT_EQ(plan->faults[0].for_ms, 500u);
  EXPECT_EQ(plan->faults[0].line, 3);
  EXPECT_EQ(plan->faults[1].kind, fault_kind::kill);
  EXPECT_EQ(describe(plan->faults[1]), "kill node 2");
  EXPECT_EQ(describe(plan->faults[0]), "pause node 1 for 500 ms");
  EXPECT_FALSE(check_fault_plan(*plan, four_nodes(), "p.yaml"));
  EXPECT_TRUE(parse_fault_plan("", "p.yaml")) << "an empty plan breaks nothing";
}

TEST(fault_plan, bad_values_are_named_with_their_line) {
  auto e = error_of("faults:\n  - {at_ms: 1, kil: 2}\n");
  EXPECT_NE(e.find("p.yaml:2: faults[0].kil: unknown field"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, partition: [[0], [1]], for_ms: 5}\n");
  EXPECT_NE(e.find("'partition' faults are not built yet"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: {type: TokenBatch}}\n");
  EXPECT_NE(e.find("'drop' faults are not built yet"), std::string::npos) << e;
  e = error_of("faults:\n  - {kill: 2}\n");
  EXPECT_NE(e.find("needs at_ms"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, pause: 2}\n");
  EXPECT_NE(e.find("a pause needs for_ms"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, kill: 2, for_ms: 3}\n");
  EXPECT_NE(e.find("for_ms applies to pauses only"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, kill: 2, pause: 3, for_ms: 1}\n");
  EXPECT_NE(e.find("exactly one of kill"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: -5, kill: 2}\n");
  EXPECT_NE(e.find("faults[0].at_ms: expected a non-negative integer"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, pause: 2, for_ms: 0}\n");
  EXPECT_NE(e.find("faults[0].for_ms: 0 is not in [1,"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, kill: 64}\n");
  EXPECT_NE(e.find("faults[0].kill: 64 is not in [0, 63]"), std::string::npos) << e;
  e = error_of("faults: {at_ms: 5}\n");
  EXPECT_NE(e.find("expected a list of faults"), std::string::npos) << e;
  e = error_of("fault:\n  - {at_ms: 5, kill: 1}\n");
  EXPECT_NE(e.find("p.yaml:1: fault: unknown field"), std::string::npos) << e;
  e = error_of("faults: [\n");
  EXPECT_NE(e.find("not valid YAML"), std::string::npos) << e;
}

TEST(fault_plan, is_checked_against_the_cluster) {
  auto check = [](const std::string& yaml) {
    auto plan = parse_fault_plan(yaml, "p.yaml");
    EXPECT_TRUE(plan) << crescent::describe(plan.error());
    auto err = check_fault_plan(*plan, four_nodes(), "p.yaml");
    EXPECT_TRUE(err) << "accepted:\n" << yaml;
    return crescent::describe(err);
  };
  auto e = check("faults:\n  - {at_ms: 5, kill: 7}\n");
  EXPECT_NE(e.find("p.yaml:2: node 7 is not in the cluster (4 nodes)"), std::string::npos) << e;
  e = check("faults:\n  - {at_ms: 5, kill: 0}\n");
  EXPECT_NE(e.find("node 0 runs in the cluster's main process"), std::string::npos) << e;
  e = check("faults:\n  - {at_ms: 5, kill: 2}\n  - {at_ms: 9, pause: 2, for_ms: 1}\n");
  EXPECT_NE(e.find("p.yaml:3: node 2 was killed at 5 ms"), std::string::npos) << e;
  e = check("faults:\n  - {at_ms: 5, pause: 1, for_ms: 10}\n  - {at_ms: 9, kill: 1}\n");
  EXPECT_NE(e.find("node 1 is paused until 15 ms"), std::string::npos) << e;
}

} // namespace
} // namespace crescent::up
