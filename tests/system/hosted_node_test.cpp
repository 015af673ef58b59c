// A cluster spanning processes: decode instances (with their nodes' block owners) in
// `crescent node` processes on loopback, the conductor, store master and prefill workers in
// this one. The KV hand-off crosses processes through the transfer engine (TCP, or shared
// memory where allowed), and the tokens must equal a monolithic run's. Processes are killed and
// misconfigured on purpose; bring-up and requests end with reasons, never hang.
//
// Each test's actor system is a real process's (process_actor_system), whose end is bounded: a
// plain caf::actor_system's end waited for ever, about one run in 30 on a loaded machine, on a
// detached worker that something still referenced (CAF 0.17; a 300 s timeout in CI at aae7ccc).
#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/child_process.hpp"
#include "apps/replay/replay_driver.hpp"
#include "apps/replay/trace.hpp"
#include "messages/checked_read.hpp"
#include "messages/errors.hpp"
#include "messages/schema/worker.capnp.h"
#include "support/node_child.hpp"
#include "support/ports.hpp"
#include "support/test_cluster.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace crescent::testing {
namespace {

// Nodes 0 and 1 prefill here; nodes 2 and 3 decode in node processes.
std::string cluster_yaml(bool shm, uint32_t layers = 2) {
  return "model: {layers: " + std::to_string(layers) +
         ", context_tokens_max: 4096}\n"
         "nodes:\n"
         "  - {prefill: 1, pool_mib: 4}\n"
         "  - {prefill: 1, pool_mib: 4}\n"
         "  - {decode: 1, pool_mib: 4}\n"
         "  - {decode: 1, pool_mib: 4}\n"
         "prefill: {chunk_tokens: 64}\n"
         "decode: {kv_mib: 16, request_tokens_max: 4096}\n"
         "store: {sync_commits: false}\n"
         "conductor: {heartbeat_timeout_ms: 600}\n"
         "heartbeat_interval_ms: 100\n"
         "request_deadline_ms: 20000\n" // below control_timeout: a stall fails a test

         "transfer: {shm: " +
         std::string{shm ? "true" : "false"} + "}\n";
}

// The same, with four layers and a prefill group of two: node 0's instance is its head, node
// 1's its second stage; chunks of 40 tokens end inside pages.
std::string grouped_yaml() {
  auto yaml = cluster_yaml(false, 4);
  const std::string plain = "prefill: {chunk_tokens: 64}";
  yaml.replace(yaml.find(plain), plain.size(), "prefill: {chunk_tokens: 40, group_instances: 2}");
  return yaml;
}

class hosted_nodes : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("crescent-hosted-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
  }

  void TearDown() override {
    nodes.clear(); // closes their standard input: they exit
    std::filesystem::remove_all(dir);
  }

  // A `crescent node` for node n of the cluster file `yaml`, on `port` (0: any free one).
  caf::expected<node_process> start_node(uint32_t n, const std::string& yaml, uint16_t port = 0) {
    const auto file = dir / ("node-" + std::to_string(n) + ".yaml");
    std::ofstream{file} << yaml;
    return start_node_process(file.string(), n, port);
  }

  // Waits up to 20 s for the conductor to count `n` live nodes; false if it never does.
  static bool await_live_nodes(caf::actor_system& sys, cluster& cl, uint32_t n) {
    caf::scoped_actor self{sys};
    for (int k = 0; k < 2000; ++k) {
      uint32_t live = 0;
      self->request(cl.dir().conductor, std::chrono::seconds(5), stats_atom::value)
          .receive(
              [&](typed_envelope<wire::ConductorStats>& s) {
                auto v = read_as<wire::ConductorStats>(
                    s, [](wire::ConductorStats::Reader in) { return in.getLiveNodes(); });
                live = v ? *v : 0;
              },
              [](caf::error&) {});
      if (live == n)
        return true;
      poll(nullptr, 0, 10);
    }
    return false;
  }

  // The cluster of `yaml` with nodes `hosted` at the node processes started for them.
  cluster_config main_config(const std::string& yaml, std::vector<uint32_t> hosted = {2, 3}) {
    auto cfg = parse_cluster_config(yaml, "test");
    EXPECT_TRUE(cfg) << describe(cfg.error());
    for (uint32_t n : hosted) {
      auto p = start_node(n, yaml);
      EXPECT_TRUE(p) << describe(p.error());
      if (!p)
        continue;
      cfg->nodes[n].address = "127.0.0.1:" + std::to_string(p->port);
      nodes.push_back(std::move(*p));
    }
    cfg->join_timeout_ms = 10000;
    return *cfg;
  }

  std::vector<replay::synthetic_request> trace_requests(const cluster_config& cfg, size_t n,
                                                        double output_scale) {
    auto records = replay::read_trace(CRESCENT_TEST_DATA_DIR "/trace_head.jsonl", n);
    EXPECT_TRUE(records) << describe(records.error());
    replay::workload_options w{cfg.model.block_tokens, cfg.model.vocab, output_scale, 50.0};
    std::vector<replay::synthetic_request> out;
    for (size_t i = 0; records && i < records->size(); ++i)
      out.push_back(replay::synthesize((*records)[i], i, w));
    return out;
  }

  // Replays `reqs` in real time on `cl`; results in id order.
  static std::vector<replay::request_result>
  replay_on(caf::actor_system& sys, cluster& cl, std::vector<replay::synthetic_request> reqs) {
    auto results = std::make_shared<std::vector<replay::request_result>>();
    auto driver = replay::spawn_replay_driver(sys, cl, std::move(reqs), results);
    caf::scoped_actor self{sys};
    self->request(driver, caf::infinite, run_atom::value)
        .receive([] {}, [](caf::error& e) { ADD_FAILURE() << describe(e); });
    auto out = *results;
    std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.id < b.id; });
    return out;
  }

  // Every request completed with the tokens of a monolithic run.
  static void expect_all_monolithic(const cluster_config& cfg,
                                    const std::vector<replay::synthetic_request>& reqs,
                                    const std::vector<replay::request_result>& results) {
    ASSERT_EQ(results.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_EQ(results[i].status, replay::outcome_status::completed) << results[i].reason;
      EXPECT_EQ(results[i].tokens,
                monolithic_tokens(cfg.model, reqs[i].tokens, reqs[i].max_new_tokens))
          << "request " << i;
    }
  }

  // Bytes this process's engine wrote to `node` through `backend`.
  static uint64_t written(cluster& cl, const std::string& backend, uint32_t node) {
    uint64_t bytes = 0;
    for (const auto& m : cl.transfer().metrics())
      if (m.backend == backend && m.node == node)
        bytes += m.bytes_written;
    return bytes;
  }

  void expect_decoded_across_processes(bool shm) {
    const auto yaml = cluster_yaml(shm);
    auto cfg = main_config(yaml);
    ASSERT_EQ(nodes.size(), 2u);
    process_actor_system actors{true};
    auto& sys = actors.get();
    auto cl = cluster::start(sys, cfg);
    ASSERT_TRUE(cl) << describe(cl.error());
    auto reqs = trace_requests(cfg, 20, 0.1);
    ASSERT_EQ(reqs.size(), 20u);
    auto results = replay_on(sys, **cl, reqs);
    expect_all_monolithic(cfg, reqs, results);
    // Both hosted decode instances took KV, through the path the configuration allows.
    const std::string path = shm ? "shm" : "tcp";
    EXPECT_GT(written(**cl, path, 2), 0u);
    EXPECT_GT(written(**cl, path, 3), 0u);
    EXPECT_EQ(written(**cl, shm ? "tcp" : "shm", 2) + written(**cl, shm ? "tcp" : "shm", 3), 0u);
    (*cl)->stop();
    sys.await_all_actors_done();
  }

  // Kills node 3's process (nodes[1]) and starts another at the same port.
  void restart_node_3(const std::string& yaml) {
    const auto port = nodes[1].port;
    nodes[1].process.kill();
    auto again = start_node(3, yaml, port);
    ASSERT_TRUE(again) << describe(again.error());
    nodes[1] = std::move(*again);
  }

  // Requests decode on both nodes, node 3's at its new process, with the monolithic tokens.
  void expect_decoded_on_both(caf::actor_system& sys, cluster& cl, const cluster_config& cfg) {
    const auto before = written(cl, "tcp", 3);
    auto reqs = trace_requests(cfg, 20, 0.1);
    auto results = replay_on(sys, cl, reqs);
    expect_all_monolithic(cfg, reqs, results);
    EXPECT_GT(written(cl, "tcp", 3), before);
  }

  std::filesystem::path dir;
  std::vector<node_process> nodes;
};

TEST_F(hosted_nodes, kv_reaches_decode_processes_over_tcp_and_tokens_match) {
  expect_decoded_across_processes(false);
}

TEST_F(hosted_nodes, kv_reaches_decode_processes_over_shared_memory_and_tokens_match) {
  expect_decoded_across_processes(true);
}

TEST_F(hosted_nodes, compressed_kv_decodes_in_node_processes_that_fit_their_own_calibration) {
  // kvquant4 on the hand-off: every process fits KVQuant's calibration at bring-up, and a
  // decode process refuses blocks of any other (their hash): all complete only if they agree.
  const auto yaml = cluster_yaml(false) +
                    "kv_codec: kvquant4\n"
                    "codec: {calibration_prompts: 2, calibration_prompt_tokens: 128}\n";
  auto cfg = main_config(yaml);
  ASSERT_EQ(nodes.size(), 2u);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_TRUE(cl) << describe(cl.error());
  auto reqs = trace_requests(cfg, 12, 0.1);
  auto results = replay_on(sys, **cl, reqs);
  ASSERT_EQ(results.size(), reqs.size());
  for (const auto& r : results) {
    ASSERT_EQ(r.status, replay::outcome_status::completed) << r.reason;
    EXPECT_EQ(r.tokens.size(), reqs[r.id].max_new_tokens);
  }
  EXPECT_GT(written(**cl, "tcp", 2) + written(**cl, "tcp", 3), 0u);
  (*cl)->stop();
  sys.await_all_actors_done();
}

// Worker statistics of a prefill or decode worker, wherever it runs.
// A worker's stats: its compute so far and its free KV pages.
std::pair<uint64_t, uint32_t> worker_stats(caf::actor_system& sys, const caf::actor& worker) {
  caf::scoped_actor self{sys};
  std::pair<uint64_t, uint32_t> out{0, 0};
  self->request(worker, std::chrono::seconds(10), stats_atom::value)
      .receive(
          [&](const typed_envelope<wire::WorkerStats>& stats) {
            auto r = read_as<wire::WorkerStats>(stats, [](wire::WorkerStats::Reader in) {
              return std::make_pair(in.getComputeNs(), in.getFreePages());
            });
            out = r ? *r : out;
          },
          [](caf::error& e) { ADD_FAILURE() << describe(e); });
  return out;
}

uint64_t compute_ns(caf::actor_system& sys, const caf::actor& worker) {
  return worker_stats(sys, worker).first;
}

TEST_F(hosted_nodes, prefill_and_decode_in_node_processes_serve_with_the_right_tokens) {
  // Prefill on node 0 here and node 1 in a node process; decode on node 2 here and node 3 in
  // another node process: the hosted prefill worker hands off to another process either way.
  auto cfg = main_config(cluster_yaml(false), {1, 3});
  ASSERT_EQ(nodes.size(), 2u);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_TRUE(cl) << describe(cl.error());
  auto reqs = trace_requests(cfg, 30, 0.1);
  auto results = replay_on(sys, **cl, reqs);
  expect_all_monolithic(cfg, reqs, results);
  // Every instance worked, those in node processes included.
  const auto& d = (*cl)->dir();
  for (uint32_t i = 0; i < 2; ++i) {
    EXPECT_GT(compute_ns(sys, caf::actor_cast<caf::actor>(d.prefill[i])), 0u) << "prefill " << i;
    EXPECT_GT(compute_ns(sys, caf::actor_cast<caf::actor>(d.decode[i])), 0u) << "decode " << i;
  }
  (*cl)->stop();
  sys.await_all_actors_done();
  // The prefill process, told to exit, says what it moved: KV over TCP (every decode instance
  // is in another process; which ones it handed off to is the conductor's choice).
  auto& prefill = nodes[0].process;
  prefill.close_input();
  std::string report;
  for (auto line = prefill.read_line(std::chrono::seconds(20)); line;
       line = prefill.read_line(std::chrono::seconds(20)))
    report += *line + "\n";
  EXPECT_NE(report.find("crescent-node node=1 exits"), std::string::npos) << report;
  EXPECT_NE(report.find("KV moved"), std::string::npos) << report;
  EXPECT_NE(report.find("tcp to node "), std::string::npos) << report;
  EXPECT_EQ(report.find("shm to node "), std::string::npos) << report;
}

TEST_F(hosted_nodes, a_prefill_group_across_processes_decodes_the_monolithic_tokens) {
  // A group of two: its head on node 0 here, its second stage on node 1 in a node process, so
  // that streams, the prefix's layers and the second stage's KV cross processes over TCP.
  auto cfg = main_config(grouped_yaml(), {1, 3});
  ASSERT_EQ(nodes.size(), 2u);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_TRUE(cl) << describe(cl.error());
  auto reqs = trace_requests(cfg, 12, 0.1);
  auto results = replay_on(sys, **cl, reqs);
  expect_all_monolithic(cfg, reqs, results);
  for (const auto& r : results)
    EXPECT_EQ(r.prefill_instance, 0u) << "the group's head takes its jobs";
  const auto& d = (*cl)->dir();
  EXPECT_GT(compute_ns(sys, caf::actor_cast<caf::actor>(d.prefill[1])), 0u) << "the stage ran";
  (*cl)->stop();
  sys.await_all_actors_done();
}

TEST_F(hosted_nodes, a_prefill_stage_process_killed_mid_run_fails_its_requests_and_leaks_no_page) {
  auto cfg = main_config(grouped_yaml(), {1, 3});
  ASSERT_EQ(nodes.size(), 2u);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_TRUE(cl) << describe(cl.error());
  const auto head = caf::actor_cast<caf::actor>((*cl)->dir().prefill[0]);
  const auto decode = caf::actor_cast<caf::actor>((*cl)->dir().decode[0]);
  const uint32_t head_pages = worker_stats(sys, head).second;
  const uint32_t decode_pages = worker_stats(sys, decode).second;
  auto reqs = trace_requests(cfg, 20, 1.0);
  std::vector<replay::request_result> results;
  std::thread replay{[&] { results = replay_on(sys, **cl, reqs); }};
  // The stage's process dies once streams have reached it: a group job is in flight.
  while (written(**cl, "tcp", 1) == 0)
    poll(nullptr, 0, 1);
  nodes[0].process.kill();
  replay.join();
  ASSERT_EQ(results.size(), reqs.size());
  size_t failed = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    if (r.status == replay::outcome_status::completed) {
      EXPECT_EQ(r.tokens, monolithic_tokens(cfg.model, reqs[i].tokens, reqs[i].max_new_tokens));
      continue;
    }
    if (r.status == replay::outcome_status::failed) {
      // The head's watch on the stage ("prefill stage 1 failed"), or a stream to its process
      // ("a stream to stage 1 failed"), tells first.
      EXPECT_NE(r.reason.find("stage 1"), std::string::npos) << r.reason;
      ++failed;
    } // else rejected: the group is gone with its node, so nothing can prefill
  }
  EXPECT_GT(failed, 0u);
  // The head's pages (held until no stage writes them) and this decode instance's come back.
  for (int i = 0; i < 200 && worker_stats(sys, head).second != head_pages; ++i)
    poll(nullptr, 0, 10);
  EXPECT_EQ(worker_stats(sys, head).second, head_pages);
  EXPECT_EQ(worker_stats(sys, decode).second, decode_pages);
  (*cl)->stop();
  sys.await_all_actors_done();
}

TEST_F(hosted_nodes, a_node_process_with_another_model_refuses_the_join) {
  auto cfg = *parse_cluster_config(cluster_yaml(false), "test");
  auto other = start_node(2, cluster_yaml(false, 3)); // three layers there, two here
  ASSERT_TRUE(other) << describe(other.error());
  cfg.nodes[2].address = "127.0.0.1:" + std::to_string(other->port);
  cfg.nodes[3].address = "127.0.0.1:" + std::to_string(unused_ports(1)[0]);
  nodes.push_back(std::move(*other));
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_FALSE(cl);
  EXPECT_NE(describe(cl.error()).find("node 2 at"), std::string::npos) << describe(cl.error());
  EXPECT_NE(describe(cl.error()).find("model fingerprint"), std::string::npos)
      << describe(cl.error());
  // The refusing process ends before this actor system does: about one run in eight, a plain
  // caf::actor_system's end otherwise waited for ever on a detached actor of the failed start
  // (the join had handed the conductor and store master to that process). Not understood yet;
  // process_actor_system now bounds that wait too.
  nodes.clear();
}

TEST_F(hosted_nodes, bring_up_fails_when_no_node_process_answers) {
  auto cfg = *parse_cluster_config(cluster_yaml(false), "test");
  const auto ports = unused_ports(2);
  for (uint32_t n = 2; n < 4; ++n)
    cfg.nodes[n].address = "127.0.0.1:" + std::to_string(ports[n - 2]);
  cfg.join_timeout_ms = 300;
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_FALSE(cl);
  EXPECT_TRUE(is(cl.error(), errc::unavailable)) << describe(cl.error());
  EXPECT_NE(describe(cl.error()).find("no `crescent node` process answered"), std::string::npos);
}

TEST_F(hosted_nodes, a_decode_process_killed_mid_run_fails_its_requests_and_the_rest_complete) {
  auto cfg = main_config(cluster_yaml(false));
  ASSERT_EQ(nodes.size(), 2u);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_TRUE(cl) << describe(cl.error());
  auto reqs = trace_requests(cfg, 20, 1.0);
  std::vector<replay::request_result> results;
  std::thread replay{[&] { results = replay_on(sys, **cl, reqs); }};
  // Node 3 dies once KV has reached it: requests decoding there are in flight.
  while (written(**cl, "tcp", 3) == 0)
    poll(nullptr, 0, 1);
  nodes[1].process.kill();
  replay.join();
  ASSERT_EQ(results.size(), reqs.size());
  size_t completed = 0, lost = 0;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    // Every request ends, long before its deadline: those at node 3 fail with the reason, the
    // others complete on node 2 (the conductor drops node 3 when its agent is gone).
    if (r.status == replay::outcome_status::completed) {
      ++completed;
      EXPECT_EQ(r.tokens, monolithic_tokens(cfg.model, reqs[i].tokens, reqs[i].max_new_tokens));
      continue;
    }
    EXPECT_EQ(r.status, replay::outcome_status::failed);
    // The request's watch on the instance, or the prefill worker's failed write, tells first.
    EXPECT_TRUE(r.reason.find("decode instance 1 stopped") != std::string::npos ||
                r.reason.find("KV hand-off to decode failed") != std::string::npos)
        << r.reason;
    ++lost;
  }
  // How many were at node 3 when it died depends on timing: up to about half of them, as the
  // conductor spreads decoding over both nodes (10 of 20 seen on a loaded machine). Some were,
  // and the rest completed.
  EXPECT_GT(lost, 0u);
  EXPECT_GT(completed, 0u);
  (*cl)->stop();
  sys.await_all_actors_done();
}

TEST_F(hosted_nodes, a_killed_decode_process_started_again_is_taken_back_when_asked) {
  const auto yaml = cluster_yaml(false) + "rejoin_interval_ms: 0\n"; // only when asked
  auto cfg = main_config(yaml);
  ASSERT_EQ(nodes.size(), 2u);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_TRUE(cl) << describe(cl.error());
  // Only a node of a `crescent node` process rejoins, and only once its process is lost.
  EXPECT_TRUE(is((*cl)->rejoin_node(0), errc::invalid_argument));
  auto err = (*cl)->rejoin_node(3);
  EXPECT_TRUE(is(err, errc::already_exists)) << describe(err);
  const auto old_decode = (*cl)->dir().decode[1];
  restart_node_3(yaml);
  ASSERT_TRUE(await_live_nodes(sys, **cl, 3)) << "the conductor still counts node 3";
  err = (*cl)->rejoin_node(3);
  ASSERT_FALSE(err) << describe(err);
  EXPECT_NE((*cl)->dir().decode[1], old_decode);
  ASSERT_TRUE(await_live_nodes(sys, **cl, 4)); // placed on from the next liveness check
  expect_decoded_on_both(sys, **cl, cfg);
  (*cl)->stop();
  sys.await_all_actors_done();
}

TEST_F(hosted_nodes, a_killed_decode_process_started_again_rejoins_by_itself_and_decodes) {
  const auto yaml = cluster_yaml(false) + "rejoin_interval_ms: 100\n";
  auto cfg = main_config(yaml);
  ASSERT_EQ(nodes.size(), 2u);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  ASSERT_TRUE(cl) << describe(cl.error());
  const auto old_agent = (*cl)->dir().node_agents[3];
  restart_node_3(yaml);
  // The watch finds the new process at node 3's address and takes it back.
  for (int k = 0; k < 2000 && (*cl)->dir().node_agents[3] == old_agent; ++k)
    poll(nullptr, 0, 10);
  ASSERT_NE((*cl)->dir().node_agents[3], old_agent) << "node 3 did not rejoin within 20 s";
  ASSERT_TRUE(await_live_nodes(sys, **cl, 4));
  expect_decoded_on_both(sys, **cl, cfg);
  (*cl)->stop();
  sys.await_all_actors_done();
}

} // namespace
} // namespace crescent::testing
