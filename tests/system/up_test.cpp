// `crescent up` for real: node processes started from one file on loopback, a workload, a fault
// plan, the invariants, and nothing left running afterwards, also after SIGINT.
#include "apps/bench/child_process.hpp"
#include "messages/errors.hpp"
#include "support/ports.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace crescent::testing {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in{p};
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The process ids a run wrote (processes.txt), the main one's included.
std::vector<pid_t> pids_of(const std::filesystem::path& run_dir) {
  std::vector<pid_t> out;
  std::ifstream in{run_dir / "processes.txt"};
  std::string kind, a, b;
  while (in >> kind) {
    if (kind == "main" && in >> a)
      out.push_back(std::stoi(a));
    else if (kind == "node" && in >> a >> b)
      out.push_back(std::stoi(b));
  }
  return out;
}

bool gone(pid_t pid) {
  return kill(pid, 0) != 0 && errno == ESRCH;
}

class up : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = std::filesystem::temp_directory_path() /
          ("crescent-up-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    // Nodes 1 (prefill) and 2 (decode) in processes of their own, started through a launcher
    // template as a remote launcher would be (here a local shell: the stand-in for ssh).
    cluster = dir / "cluster.yaml";
    std::ofstream{cluster} << "nodes:\n"
                              "  - {prefill: 1}\n"
                              "  - {prefill: 1, address: \"127.0.0.1:"
                           << unused_port()
                           << "\"}\n"
                              "  - {decode: 1, address: \"127.0.0.1:"
                           << unused_port()
                           << "\"}\n"
                              "  - {decode: 1}\n"
                              "launcher: \"exec {crescent} node --config {config} --node {node}\"\n"
                              "join_timeout_ms: 20000\n";
  }

  void TearDown() override { std::filesystem::remove_all(dir); }

  caf::expected<bench::child_process> start(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"up",        cluster.string(), "--trace",      CRESCENT_TRACE,
                                  "--run-dir", run_dir.string(), "--no-progress"};
    args.insert(args.end(), extra.begin(), extra.end());
    return bench::child_process::spawn(CRESCENT_BINARY, args, (dir / "up.err").string());
  }

  std::filesystem::path dir, cluster;
  std::filesystem::path run_dir = dir / "run";
};

TEST_F(up, brings_a_cluster_up_from_one_file_and_leaves_no_process_behind) {
  run_dir = dir / "run";
  auto p = start({"--requests", "12"});
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(std::chrono::seconds(120));
  ASSERT_TRUE(status) << describe(status.error());
  EXPECT_EQ(*status, 0) << read_file(dir / "up.err");
  const auto report = read_file(run_dir / "report.txt");
  EXPECT_NE(report.find("requests      completed 12"), std::string::npos) << report;
  EXPECT_NE(report.find("invariants    held: 12 of 12"), std::string::npos) << report;
  EXPECT_NE(read_file(run_dir / "node-1.log").find("crescent-node node=1"), std::string::npos);
  EXPECT_NE(read_file(run_dir / "node-2.log").find("KV moved"), std::string::npos)
      << "a node's counters, printed as it exits, are in its log";
  const auto pids = pids_of(run_dir);
  ASSERT_EQ(pids.size(), 3u);
  for (auto pid : pids)
    EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
}

TEST_F(up, a_killed_and_a_paused_node_process_break_no_invariant) {
  run_dir = dir / "run";
  std::ofstream{dir / "plan.yaml"} << "faults:\n"
                                      "  - {at_ms: 100, pause: 1, for_ms: 500}\n"
                                      "  - {at_ms: 300, kill: 2}\n";
  auto p = start({"--requests", "40", "--faults", (dir / "plan.yaml").string()});
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(std::chrono::seconds(120));
  ASSERT_TRUE(status) << describe(status.error());
  const auto report = read_file(run_dir / "report.txt");
  // Requests on the killed node may fail (status 1), with their reason; none may be lost or
  // decode other tokens.
  EXPECT_TRUE(*status == 0 || *status == 1) << *status << "\n" << read_file(dir / "up.err");
  EXPECT_NE(report.find("faults        2 of 2 carried out"), std::string::npos) << report;
  EXPECT_NE(report.find("invariants    held: 40 of 40"), std::string::npos) << report;
  // After the faults: the paused node counts as live again, the killed one does not.
  EXPECT_NE(report.find("settled       the conductor counts every node not killed as live"),
            std::string::npos)
      << report;
  const auto faults = read_file(run_dir / "faults.log");
  EXPECT_NE(faults.find("pause node 1 for 500 ms"), std::string::npos) << faults;
  EXPECT_NE(faults.find("kill node 2"), std::string::npos) << faults;
  EXPECT_NE(faults.find("resume node 1"), std::string::npos) << faults;
  for (auto pid : pids_of(run_dir))
    EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
}

TEST_F(up, requests_on_a_silent_node_fail_within_the_heartbeat_timeout_and_it_serves_again) {
  run_dir = dir / "run";
  // Heartbeats every 100 ms, silence after 600 ms: a decode node paused for 3 s goes silent,
  // its requests fail then (not at their deadline of 300 s), and it takes requests again once
  // it resumes.
  std::ofstream{cluster, std::ios::app} << "heartbeat_interval_ms: 100\n"
                                           "conductor: {heartbeat_timeout_ms: 600}\n";
  std::ofstream{dir / "plan.yaml"} << "faults:\n  - {at_ms: 200, pause: 2, for_ms: 3000}\n";
  auto p = start({"--requests", "160", "--speedup", "8", "--faults", (dir / "plan.yaml").string()});
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(std::chrono::seconds(120));
  ASSERT_TRUE(status) << describe(status.error());
  const auto report = read_file(run_dir / "report.txt");
  EXPECT_NE(report.find("x node 2 went silent: no heartbeat for 600 ms"), std::string::npos)
      << report;
  EXPECT_NE(report.find("invariants    held: 160 of 160"), std::string::npos) << report;
  // Decode instance 0 is node 2: requests that came after it resumed completed there.
  std::ifstream lines{run_dir / "requests.jsonl"};
  size_t served_after = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"decode_instance\":0") != std::string::npos &&
        line.find("\"status\":\"completed\"") != std::string::npos) {
      const auto at = line.find("\"arrival_ms\":");
      if (at != std::string::npos && std::stod(line.substr(at + 13)) > 3300)
        ++served_after;
    }
  EXPECT_GT(served_after, 0u) << "node 2 took requests again once it resumed";
  for (auto pid : pids_of(run_dir))
    EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
}

TEST_F(up, sigint_tears_every_process_down) {
  run_dir = dir / "run";
  auto p = start({"--requests", "3000"});
  ASSERT_TRUE(p) << describe(p.error());
  // Its nodes are up once it names its run.
  for (;;) {
    auto line = p->read_line(std::chrono::seconds(60));
    ASSERT_TRUE(line) << describe(line.error()) << read_file(dir / "up.err");
    if (line->find("  run ") == 0)
      break;
  }
  const auto pids = pids_of(run_dir);
  ASSERT_EQ(pids.size(), 3u);
  ASSERT_TRUE(p->signal(SIGINT));
  auto status = p->wait_exit(std::chrono::seconds(60));
  ASSERT_TRUE(status) << describe(status.error());
  EXPECT_EQ(*status, 130);
  for (size_t i = 1; i < pids.size(); ++i)
    EXPECT_TRUE(gone(pids[i])) << "node process " << pids[i] << " is still there";
}

TEST_F(up, a_bad_plan_or_a_node_that_does_not_start_is_exit_status_two) {
  run_dir = dir / "run";
  std::ofstream{dir / "plan.yaml"} << "faults:\n  - {at_ms: 1, kill: 0}\n";
  auto p = start({"--faults", (dir / "plan.yaml").string()});
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(std::chrono::seconds(60));
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 2);
  EXPECT_NE(read_file(dir / "up.err").find("runs in the cluster's main process"),
            std::string::npos);
  // A launcher that starts nothing: the start fails, and says where to look.
  std::ofstream{cluster, std::ios::app} << "";
  auto text = read_file(cluster);
  text.replace(text.find("exec {crescent}"), 15, "exec /bin/false");
  std::ofstream{cluster} << text;
  run_dir = dir / "run2";
  p = start({});
  ASSERT_TRUE(p) << describe(p.error());
  status = p->wait_exit(std::chrono::seconds(60));
  ASSERT_TRUE(status);
  EXPECT_EQ(*status, 2);
  EXPECT_NE(read_file(dir / "up.err").find("did not start"), std::string::npos)
      << read_file(dir / "up.err");
}

} // namespace
} // namespace crescent::testing
