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

TEST(fault_plan, a_kill_may_start_the_node_again) {
  auto plan =
      parse_fault_plan("faults:\n  - {at_ms: 900, kill: 2, restart_after_ms: 1500}\n", "p.yaml");
  ASSERT_TRUE(plan) << crescent::describe(plan.error());
  EXPECT_EQ(plan->faults[0].restart_after_ms, 1500u);
  EXPECT_EQ(describe(plan->faults[0]), "kill node 2, start it again 1500 ms later");
  EXPECT_EQ(format_fault_plan(*plan),
            "faults:\n  - {at_ms: 900, kill: 2, restart_after_ms: 1500}\n");
  EXPECT_FALSE(check_fault_plan(*plan, four_nodes(), "p.yaml"));
  // The new process rejoins only where the main process looks for it.
  auto no_rejoin = four_nodes();
  no_rejoin.rejoin_interval_ms = 0;
  auto e = crescent::describe(check_fault_plan(*plan, no_rejoin, "p.yaml"));
  EXPECT_NE(e.find("p.yaml:2: restart_after_ms: the new process would never rejoin"),
            std::string::npos)
      << e;
  EXPECT_FALSE(check_sim_fault_plan(*plan, four_nodes(), "p.yaml"));
  e = error_of("faults:\n  - {at_ms: 5, pause: 2, for_ms: 3, restart_after_ms: 3}\n");
  EXPECT_NE(e.find("restart_after_ms applies to a kill only"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, kill: 2, restart_after_ms: 0}\n");
  EXPECT_NE(e.find("faults[0].restart_after_ms: 0 is not in [1,"), std::string::npos) << e;
}

TEST(fault_plan, bad_values_are_named_with_their_line) {
  auto e = error_of("faults:\n  - {at_ms: 1, kil: 2}\n");
  EXPECT_NE(e.find("p.yaml:2: faults[0].kil: unknown field"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, partition: [[0], [1]], for_ms: 5}\n");
  EXPECT_NE(e.find("faults[0].partition[0]: expected a number"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, partition: [1, 1], for_ms: 5}\n");
  EXPECT_NE(e.find("node 1 is named twice"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, partition: [1]}\n");
  EXPECT_NE(e.find("a partition needs for_ms"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: {type: TokenBatch}}\n");
  EXPECT_NE(e.find("faults[0].drop: expected a number"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: 1.5}\n");
  EXPECT_NE(e.find("faults[0].drop: a probability in (0, 1], got 1.5"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, delay: 0.5}\n");
  EXPECT_NE(e.find("a delay needs delay_ms"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: 0.5, delay_ms: 4}\n");
  EXPECT_NE(e.find("delay_ms applies to delay, reorder, duplicate and delay_transfer only"),
            std::string::npos)
      << e;
  e = error_of("faults:\n  - {at_ms: 1, delay_transfer: 0.5}\n");
  EXPECT_NE(e.find("a delay_transfer needs delay_ms, how long a KV slice is held"),
            std::string::npos)
      << e;
  e = error_of("faults:\n  - {at_ms: 1, delay_transfer: 0.5, delay_ms: 3600001}\n");
  EXPECT_NE(e.find("faults[0].delay_ms: 3600001 is not in [1, 3600000]"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, delay_transfer: 0.5, delay_ms: 5, from: decode}\n");
  EXPECT_NE(e.find("a delay_transfer takes KV slices, chosen by node only"), std::string::npos)
      << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: 0.5, from: decoder}\n");
  EXPECT_NE(e.find("faults[0].from: 'decoder' is not a role"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: 0.5, peer: 2}\n");
  EXPECT_NE(e.find("peer needs node"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: 0.5, node: 2, peer: 2}\n");
  EXPECT_NE(e.find("node and peer are the same place"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, drop: 0.5, node: main}\n");
  EXPECT_NE(e.find("faults[0].node: expected"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, kill: 2, type: tokens}\n");
  EXPECT_NE(e.find("a kill takes none"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, corrupt: 0.1, type: tokens}\n");
  EXPECT_NE(e.find("a corrupt takes KV slices, chosen by node only"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 1, fail_transfer: 2}\n");
  EXPECT_NE(e.find("faults[0].fail_transfer: a probability in (0, 1]"), std::string::npos) << e;
  e = error_of("faults:\n  - {kill: 2}\n");
  EXPECT_NE(e.find("needs at_ms"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, pause: 2}\n");
  EXPECT_NE(e.find("a pause needs for_ms"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, kill: 2, for_ms: 3}\n");
  EXPECT_NE(e.find("for_ms does not apply to it"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, kill: 2, pause: 3, for_ms: 1}\n");
  EXPECT_NE(e.find("exactly one of kill, pause, partition"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: -5, kill: 2}\n");
  EXPECT_NE(e.find("faults[0].at_ms: expected a non-negative integer"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, pause: 2, for_ms: 0}\n");
  EXPECT_NE(e.find("faults[0].for_ms: 0 is not in [1,"), std::string::npos) << e;
  e = error_of("faults:\n  - {at_ms: 5, kill: 256}\n");
  EXPECT_NE(e.find("faults[0].kill: 256 is not in [0, 255]"), std::string::npos) << e;
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

TEST(fault_plan, reads_message_faults_and_writes_them_back_the_same) {
  const std::string text = "faults:\n"
                           "  - {at_ms: 0, drop: 0.05, node: 2, peer: 3}\n"
                           "  - {at_ms: 10, delay: 0.1, delay_ms: 200, type: tokens, from: "
                           "decode, to: request, for_ms: 900}\n"
                           "  - {at_ms: 20, duplicate: 1, node: 1, peer: main}\n"
                           "  - {at_ms: 30, reorder: 0.0125, delay_ms: 50}\n"
                           "  - {at_ms: 40, partition: [0, 1], for_ms: 800}\n"
                           "  - {at_ms: 50, corrupt: 0.5, node: 2}\n"
                           "  - {at_ms: 60, fail_transfer: 0.25, for_ms: 10}\n"
                           "  - {at_ms: 70, delay_transfer: 0.1, delay_ms: 20, node: 1}\n"
                           "  - {at_ms: 80, duplicate: 0.5, delay_ms: 300, type: prefill}\n";
  auto plan = parse_fault_plan(text, "p.yaml");
  ASSERT_TRUE(plan) << crescent::describe(plan.error());
  ASSERT_EQ(plan->faults.size(), 9u);
  EXPECT_EQ(plan->faults[2].delay_ms, 0u) << "a copy at once";
  EXPECT_EQ(plan->faults[8].delay_ms, 300u);
  EXPECT_EQ(describe(plan->faults[8]),
            "duplicate 50% of 'prefill' messages (the copy 300 ms late)");
  const auto& drop = plan->faults[0];
  EXPECT_EQ(drop.kind, fault_kind::drop);
  EXPECT_DOUBLE_EQ(drop.probability, 0.05);
  EXPECT_EQ(drop.match.node, 2);
  EXPECT_EQ(drop.match.peer, 3);
  EXPECT_EQ(drop.for_ms, 0u) << "to the end";
  EXPECT_EQ(describe(drop), "drop 5% of messages between node 2 and node 3");
  EXPECT_EQ(describe(plan->faults[1]),
            "delay 10% of 'tokens' messages from decode to request by 200 ms for 900 ms");
  EXPECT_EQ(plan->faults[2].match.peer, main_place);
  EXPECT_EQ(describe(plan->faults[2]),
            "duplicate 100% of messages between node 1 and the main process");
  EXPECT_EQ(describe(plan->faults[3]), "reorder 1.25% of messages (held up to 50 ms)");
  EXPECT_EQ(describe(plan->faults[4]), "cut nodes 0, 1 from the others for 800 ms");
  EXPECT_EQ(describe(plan->faults[5]), "corrupt 50% of KV slices to or from node 2");
  EXPECT_EQ(describe(plan->faults[6]), "fail 25% of KV slices for 10 ms");
  EXPECT_EQ(plan->faults[7].kind, fault_kind::delay_transfer);
  EXPECT_EQ(plan->faults[7].delay_ms, 20u);
  EXPECT_EQ(describe(plan->faults[7]), "delay 10% of KV slices to or from node 1 by 20 ms");
  // What chaos prints for a seed reads back as the same plan.
  auto again = parse_fault_plan(format_fault_plan(*plan), "again.yaml");
  ASSERT_TRUE(again) << crescent::describe(again.error()) << format_fault_plan(*plan);
  EXPECT_EQ(format_fault_plan(*again), format_fault_plan(*plan));
  ASSERT_EQ(again->faults.size(), 9u);
  EXPECT_DOUBLE_EQ(again->faults[3].probability, 0.0125);
  // Simulated time takes every kind; crescent up only what crosses between processes (node 3
  // runs in the main process).
  EXPECT_FALSE(check_sim_fault_plan(*plan, four_nodes(), "p.yaml"));
  auto e = crescent::describe(check_fault_plan(*plan, four_nodes(), "p.yaml"));
  EXPECT_NE(e.find("p.yaml:2: node 3 runs in the cluster's main process"), std::string::npos) << e;
}

TEST(fault_plan, crescent_up_netns_takes_partitions_and_drops_by_node_and_peer_and_gate_faults) {
  auto check = [](const std::string& yaml) {
    auto plan = parse_fault_plan(yaml, "p.yaml");
    EXPECT_TRUE(plan) << crescent::describe(plan.error());
    return check_fault_plan(*plan, four_nodes(), "p.yaml", true);
  };
  EXPECT_FALSE(check("faults:\n"
                     "  - {at_ms: 0, drop: 0.05, node: 1, peer: 2}\n"
                     "  - {at_ms: 0, drop: 0.05, node: 2, peer: main}\n"
                     "  - {at_ms: 0, drop: 0.01}\n"
                     "  - {at_ms: 10, partition: [1, 2], for_ms: 2000}\n"
                     "  - {at_ms: 20, pause: 1, for_ms: 5}\n"));
  auto e = crescent::describe(check("faults:\n  - {at_ms: 0, drop: 0.5, type: tokens}\n"));
  EXPECT_NE(e.find("p.yaml:2: crescent up --netns drops packets, which carry no message type"),
            std::string::npos)
      << e;
  // Delays, duplicates and reorders of whole messages run in the message gates, as without it.
  EXPECT_FALSE(check("faults:\n  - {at_ms: 0, delay: 0.5, delay_ms: 9, type: tokens}\n"
                     "  - {at_ms: 0, duplicate: 0.1, node: 1, peer: main}\n"
                     "  - {at_ms: 0, reorder: 0.1, delay_ms: 9}\n"));
  e = crescent::describe(check("faults:\n  - {at_ms: 0, delay: 0.5, delay_ms: 9, node: 3}\n"));
  EXPECT_NE(e.find("node 3 runs in the cluster's main process"), std::string::npos) << e;
  fault f;
  f.kind = fault_kind::drop;
  EXPECT_TRUE(f.is_gate_fault(false));
  EXPECT_FALSE(f.is_gate_fault(true)) << "with --netns a drop is of packets";
  f.kind = fault_kind::delay;
  EXPECT_TRUE(f.is_gate_fault(true));
  f.kind = fault_kind::corrupt;
  EXPECT_FALSE(f.is_gate_fault(false));
  e = crescent::describe(check("faults:\n  - {at_ms: 0, partition: [0], for_ms: 9}\n"));
  EXPECT_NE(e.find("node 0 runs in the cluster's main process"), std::string::npos) << e;
  e = crescent::describe(check("faults:\n  - {at_ms: 0, drop: 0.5, node: 1, peer: 3}\n"));
  EXPECT_NE(e.find("node 3 runs in the cluster's main process"), std::string::npos) << e;
  EXPECT_NE(e.find("peer: main"), std::string::npos) << e;
  EXPECT_FALSE(check("faults:\n  - {at_ms: 0, corrupt: 0.5}\n"));
}

TEST(fault_plan, crescent_up_takes_message_faults_between_its_processes) {
  auto check = [](const std::string& yaml, const cluster_config& cfg) {
    auto plan = parse_fault_plan(yaml, "p.yaml");
    EXPECT_TRUE(plan) << crescent::describe(plan.error());
    return check_fault_plan(*plan, cfg, "p.yaml");
  };
  EXPECT_FALSE(check("faults:\n"
                     "  - {at_ms: 0, drop: 0.05, type: kv_ready, node: 2}\n"
                     "  - {at_ms: 0, delay: 0.5, delay_ms: 9, node: 1, peer: main}\n"
                     "  - {at_ms: 0, duplicate: 0.1, type: reply, for_ms: 100}\n"
                     "  - {at_ms: 0, reorder: 0.1, delay_ms: 20}\n",
                     four_nodes()));
  EXPECT_FALSE(check("faults:\n"
                     "  - {at_ms: 0, delay: 0.5, delay_ms: 9, from: decode, to: request}\n"
                     "  - {at_ms: 0, drop: 0.5, node: 1, peer: 2, type: kv_ready}\n",
                     four_nodes()));
  auto e = crescent::describe(
      check("faults:\n  - {at_ms: 0, drop: 0.5, node: 1, peer: 3}\n", four_nodes()));
  EXPECT_NE(e.find("node 3 runs in the cluster's main process"), std::string::npos) << e;
  e = crescent::describe(check("faults:\n  - {at_ms: 0, drop: 0.5, node: 3}\n", four_nodes()));
  EXPECT_NE(e.find("node 3 runs in the cluster's main process"), std::string::npos) << e;
  e = crescent::describe(check("faults:\n  - {at_ms: 0, duplicate: 0.5}\n", cluster_config{}));
  EXPECT_NE(e.find("no node runs in a process of its own"), std::string::npos) << e;
}

TEST(fault_plan, crescent_up_takes_transfer_faults_that_its_launcher_passes_on) {
  auto check = [](const std::string& yaml, const cluster_config& cfg) {
    auto plan = parse_fault_plan(yaml, "p.yaml");
    EXPECT_TRUE(plan) << crescent::describe(plan.error());
    return crescent::describe(check_fault_plan(*plan, cfg, "p.yaml"));
  };
  const std::string both = "faults:\n"
                           "  - {at_ms: 0, corrupt: 0.5, node: 3}\n"
                           "  - {at_ms: 10, fail_transfer: 0.1, for_ms: 20}\n";
  auto cfg = four_nodes();
  EXPECT_EQ(check(both, cfg), "no error") << "nodes in the main process take them too";
  cfg.launcher = "exec {crescent} node --config {config} --node {node} {faults}";
  EXPECT_EQ(check(both, cfg), "no error");
  cfg.launcher = "exec {crescent} node --config {config} --node {node}";
  auto e = check(both, cfg);
  EXPECT_NE(e.find("p.yaml:2: transfer faults reach node processes through flags their launcher "
                   "must pass on: add {faults}"),
            std::string::npos)
      << e;
  std::string many = "faults:\n";
  for (size_t i = 0; i <= transfer_faults_max; ++i)
    many += "  - {at_ms: " + std::to_string(i) + ", fail_transfer: 0.5}\n";
  e = check(many, four_nodes());
  EXPECT_NE(e.find("p.yaml:66: more than 64 transfer faults in one plan"), std::string::npos) << e;
}

TEST(fault_plan, simulated_time_checks_nodes_but_needs_no_process) {
  auto check = [](const std::string& yaml) {
    auto plan = parse_fault_plan(yaml, "p.yaml");
    EXPECT_TRUE(plan) << crescent::describe(plan.error());
    return crescent::describe(check_sim_fault_plan(*plan, four_nodes(), "p.yaml"));
  };
  auto plan = parse_fault_plan("faults:\n  - {at_ms: 5, kill: 0}\n", "p.yaml");
  ASSERT_TRUE(plan);
  EXPECT_FALSE(check_sim_fault_plan(*plan, four_nodes(), "p.yaml")) << "node 0 has no address";
  auto e = check("faults:\n  - {at_ms: 5, partition: [0, 1, 2, 3], for_ms: 9}\n");
  EXPECT_NE(e.find("must leave some node on the other side"), std::string::npos) << e;
  e = check("faults:\n  - {at_ms: 5, drop: 0.5, node: 1, peer: 9}\n");
  EXPECT_NE(e.find("node 9 is not in the cluster"), std::string::npos) << e;
  e = check("faults:\n  - {at_ms: 5, kill: 1}\n  - {at_ms: 6, kill: 1}\n");
  EXPECT_NE(e.find("p.yaml:3: node 1 was killed at 5 ms"), std::string::npos) << e;
}

} // namespace
} // namespace crescent::up
