// `crescent up` for real: node processes started from one file on loopback, a workload, a fault
// plan, the invariants, and nothing left running afterwards, also after SIGINT.
#include "apps/bench/child_process.hpp"
#include "apps/up/netns.hpp"
#include "messages/errors.hpp"
#include "support/ports.hpp"
#include "support/shell.hpp"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
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
// Requests of the run's requests.jsonl that arrived after `ms` and completed on decode
// instance 0.
size_t completed_on_decode_0_after(const std::filesystem::path& run_dir, double ms) {
  std::ifstream lines{run_dir / "requests.jsonl"};
  size_t n = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find("\"decode_instance\":0") != std::string::npos &&
        line.find("\"status\":\"completed\"") != std::string::npos) {
      const auto at = line.find("\"arrival_ms\":");
      if (at != std::string::npos && std::stod(line.substr(at + 13)) > ms)
        ++n;
    }
  return n;
}

// Requests of the run's requests.jsonl that arrived between `from_ms` and `to_ms`: all of them,
// and those placed on decode instance 0.
[[maybe_unused]] std::pair<size_t, size_t> arrived_between(const std::filesystem::path& run_dir,
                                                           double from_ms, double to_ms) {
  std::ifstream lines{run_dir / "requests.jsonl"};
  size_t all = 0, on_0 = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("\"arrival_ms\":");
    if (at == std::string::npos)
      continue;
    const double arrival_ms = std::stod(line.substr(at + 13));
    if (arrival_ms > from_ms && arrival_ms < to_ms) {
      ++all;
      on_0 += line.find("\"decode_instance\":0") != std::string::npos ? 1 : 0;
    }
  }
  return {all, on_0};
}

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
    // Both at once: two calls of unused_port() may get the same port back (the first is
    // released before the second is bound), and the file is then refused.
    const auto ports = unused_ports(2);
    std::ofstream{cluster} << "nodes:\n"
                              "  - {prefill: 1}\n"
                              "  - {prefill: 1, address: \"127.0.0.1:"
                           << ports[0]
                           << "\"}\n"
                              "  - {decode: 1, address: \"127.0.0.1:"
                           << ports[1]
                           << "\"}\n"
                              "  - {decode: 1}\n"
                              "launcher: \"exec {crescent} node --config {config} --node {node}\"\n"
                              "join_timeout_ms: 20000\n";
  }

  // A failed test leaves its logs' ends in the test's output (the run directory goes).
  void TearDown() override {
    if (HasFailure())
      print_log_tails();
    std::filesystem::remove_all(dir);
  }

  void print_log_tails() const {
    std::error_code ec;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir, ec)) {
      const auto name = e.path().filename().string();
      if (!e.is_regular_file() || (e.path().extension() != ".log" && name != "up.err"))
        continue;
      const auto text = read_file(e.path());
      const auto from = text.size() > 4000 ? text.size() - 4000 : 0;
      std::fprintf(stderr, "---- the end of %s ----\n%s\n", e.path().c_str(),
                   text.substr(from).c_str());
    }
  }

  caf::expected<bench::child_process> start(const std::vector<std::string>& extra) {
    std::vector<std::string> args{"up",        cluster.string(), "--trace",      CRESCENT_TRACE,
                                  "--run-dir", run_dir.string(), "--no-progress"};
    args.insert(args.end(), extra.begin(), extra.end());
    return bench::child_process::spawn(CRESCENT_BINARY, args, (dir / "up.err").string());
  }

  // Runs to its end and returns what it printed, checking its exit status.
  std::string run_to_end(const std::vector<std::string>& args, int expected_status) {
    auto p = start(args);
    EXPECT_TRUE(p) << describe(p.error());
    if (!p)
      return {};
    std::string out;
    for (;;) {
      auto line = p->read_line(std::chrono::seconds(120));
      if (!line)
        break; // the end of its output
      out += *line + "\n";
    }
    auto status = p->wait_exit(std::chrono::seconds(120));
    EXPECT_TRUE(status) << describe(status.error());
    EXPECT_EQ(status ? *status : -1, expected_status) << out << read_file(dir / "up.err");
    return out;
  }

  // Starts a run, sends it SIGINT once its nodes are up (it names its run then), and returns
  // its exit status (-1 with a failure added when it did not get that far).
  int interrupted(const std::vector<std::string>& args) {
    run_dir = dir / "run";
    auto p = start(args);
    EXPECT_TRUE(p) << describe(p.error());
    if (!p)
      return -1;
    for (;;) {
      auto line = p->read_line(std::chrono::seconds(60));
      EXPECT_TRUE(line) << describe(line.error()) << read_file(dir / "up.err");
      if (!line)
        return -1;
      if (line->find("  run ") == 0)
        break;
    }
    EXPECT_TRUE(p->signal(SIGINT));
    auto status = p->wait_exit(std::chrono::seconds(60));
    EXPECT_TRUE(status) << describe(status.error());
    return status ? *status : -1;
  }

  // Runs 40 requests under a plan of two faults, and returns the report once the run ended with
  // status 0 or 1, both faults carried out, and every request ended correctly.
  std::string run_faults(const std::string& faults) {
    std::ofstream{dir / "plan.yaml"} << "faults:\n" << faults;
    auto p = start({"--requests", "40", "--faults", (dir / "plan.yaml").string()});
    EXPECT_TRUE(p) << describe(p.error());
    auto status = p ? p->wait_exit(std::chrono::seconds(120)) : caf::expected<int>{-1};
    EXPECT_TRUE(status) << describe(status.error());
    const auto report = read_file(run_dir / "report.txt");
    EXPECT_TRUE(status && (*status == 0 || *status == 1)) << read_file(dir / "up.err");
    const auto n = std::count(faults.begin(), faults.end(), '\n'); // a fault a line
    const auto carried =
        "faults        " + std::to_string(n) + " of " + std::to_string(n) + " carried out";
    EXPECT_NE(report.find(carried), std::string::npos) << report;
    EXPECT_NE(report.find("invariants    held: 40 of 40"), std::string::npos) << report;
    return report;
  }

  // Runs `requests` at 8x under the plan lines `faults` to its end, checks that it ended with
  // status 0 or 1, every request correctly, and no process left; returns the report.
  std::string run_faults_to_end(const std::string& faults, const std::string& requests) {
    std::ofstream{dir / "plan.yaml"} << "faults:\n" << faults;
    auto p =
        start({"--requests", requests, "--speedup", "8", "--faults", (dir / "plan.yaml").string()});
    EXPECT_TRUE(p) << describe(p.error());
    auto status = p ? p->wait_exit(std::chrono::seconds(120)) : caf::expected<int>{-1};
    EXPECT_TRUE(status) << describe(status.error());
    EXPECT_TRUE(status && (*status == 0 || *status == 1)) << read_file(dir / "up.err");
    const auto report = read_file(run_dir / "report.txt");
    EXPECT_NE(report.find("invariants    held: " + requests + " of " + requests), std::string::npos)
        << report;
    for (auto pid : pids_of(run_dir))
      EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
    return report;
  }

  // Connections silent for 1 s close (CAF's heartbeats every 200 ms); `more`: further lines.
  void close_silent_connections_after_1_s(const std::string& more) {
    std::ofstream{cluster, std::ios::app} << "connection_heartbeat_ms: 200\n"
                                             "connection_timeout_ms: 1000\n"
                                          << more;
  }

  // Node 2 (decode instance 0), cut off past the connection timeout, started afresh and was
  // taken back: not lost, live at the end, and requests that came after `ms` completed there.
  void expect_node_2_taken_back(const std::string& report, double ms) {
    EXPECT_EQ(report.find("lost          node 2"), std::string::npos) << report;
    EXPECT_NE(report.find("settled       the conductor counts every node not killed or lost as "
                          "live"),
              std::string::npos)
        << report;
    const auto log = read_file(run_dir / "node-2.log");
    EXPECT_NE(log.find("started afresh, it waits 60000 ms to be taken back"), std::string::npos)
        << log;
    EXPECT_GT(completed_on_decode_0_after(run_dir, ms), 0u) << "node 2 took requests again";
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

// --kv-send ab: four bring-ups, sent after and streamed in turn; the hosted prefill instance
// (node 1) reads the round's own cluster file, which says how it sends.
TEST_F(up, kv_send_ab_alternates_four_bring_ups_and_prints_the_ratio) {
  run_dir = dir / "run";
  const auto out = run_to_end({"--requests", "6", "--kv-send", "ab"}, 0);
  EXPECT_NE(out.find("ratio         mean TTFT streamed / sent after: "), std::string::npos) << out;
  for (const char* round : {"after-1", "stream-1", "after-2", "stream-2"}) {
    const auto report = read_file(run_dir / round / "report.txt");
    EXPECT_NE(report.find("invariants    held: 6 of 6"), std::string::npos) << round << report;
    const bool stream = std::string{round}.rfind("stream", 0) == 0;
    EXPECT_NE(read_file(run_dir / round / "cluster.yaml")
                  .find(stream ? "stream_min_tokens: 0\n" : "stream_min_tokens: 4294967295\n"),
              std::string::npos)
        << round;
    for (auto pid : pids_of(run_dir / round))
      EXPECT_TRUE(gone(pid)) << round << ": process " << pid << " is still there";
  }
}

// --kv-send pairs: one bring-up; each request and its twin, one sent after and one streamed.
TEST_F(up, kv_send_pairs_runs_twins_in_one_bring_up_and_prints_their_ratio) {
  run_dir = dir / "run";
  run_to_end({"--requests", "3", "--kv-send", "pairs"}, 0);
  const auto report = read_file(run_dir / "report.txt");
  EXPECT_NE(report.find("invariants    held: 6 of 6"), std::string::npos) << report;
  EXPECT_NE(report.find("ratio         mean TTFT streamed / sent after: "), std::string::npos)
      << report;
  EXPECT_NE(report.find("3 of 3 pairs completed"), std::string::npos) << report;
  for (auto pid : pids_of(run_dir))
    EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
}

TEST_F(up, a_killed_and_a_paused_node_process_break_no_invariant) {
  run_dir = dir / "run";
  // Requests on the killed node may fail (status 1), with their reason; none may be lost or
  // decode other tokens.
  const auto report = run_faults("  - {at_ms: 100, pause: 1, for_ms: 500}\n"
                                 "  - {at_ms: 300, kill: 2}\n");
  // After the faults: the paused node counts as live again, the killed one does not.
  EXPECT_NE(report.find("settled       the conductor counts every node not killed or lost as live"),
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
  const auto report = run_faults_to_end("  - {at_ms: 200, pause: 2, for_ms: 3000}\n", "160");
  EXPECT_NE(report.find("x node 2 went silent: no heartbeat for 600 ms"), std::string::npos)
      << report;
  // Decode instance 0 is node 2: requests that came after it resumed completed there.
  EXPECT_GT(completed_on_decode_0_after(run_dir, 3300), 0u)
      << "node 2 took requests again once it resumed";
}

TEST_F(up, with_retries_the_requests_of_a_silent_node_continue_elsewhere_and_none_fails) {
  run_dir = dir / "run";
  // As above, with request_retries_max: what node 2 held when it went silent is placed again
  // (past its first token, continuing its output) on decode instance 1 instead of failing.
  std::ofstream{cluster, std::ios::app} << "heartbeat_interval_ms: 100\n"
                                           "conductor: {heartbeat_timeout_ms: 600}\n"
                                           "request_retries_max: 2\n";
  const auto report = run_faults_to_end("  - {at_ms: 200, pause: 2, for_ms: 3000}\n", "160");
  EXPECT_NE(report.find("  failed 0\n"), std::string::npos) << report;
  const auto retried = report.find("retried       ");
  ASSERT_NE(retried, std::string::npos) << report;
  // "retried       N requests placed again after a failed attempt, N of them completed"
  std::istringstream line{report.substr(retried + 14)};
  size_t placed_again = 0, completed = 0;
  std::string words;
  line >> placed_again;
  for (int i = 0; i < 7; ++i)
    line >> words;
  line >> completed;
  EXPECT_GT(placed_again, 0u) << report;
  EXPECT_EQ(completed, placed_again) << report;
}

TEST_F(up, a_killed_node_process_started_again_rejoins_and_serves_again) {
  run_dir = dir / "run";
  // Decode node 2 is killed at 200 ms and a new process starts at its address 800 ms later;
  // the main process looks for it every 200 ms and takes it back.
  std::ofstream{cluster, std::ios::app} << "heartbeat_interval_ms: 100\n"
                                           "conductor: {heartbeat_timeout_ms: 600}\n"
                                           "rejoin_interval_ms: 200\n";
  const auto report =
      run_faults_to_end("  - {at_ms: 200, kill: 2, restart_after_ms: 800}\n", "160");
  // Node 2 counts as live at the end: its new process rejoined.
  EXPECT_NE(report.find("settled       the conductor counts every node not killed or lost as live"),
            std::string::npos)
      << report;
  const auto faults = read_file(run_dir / "faults.log");
  EXPECT_NE(faults.find("kill node 2, start it again 800 ms later"), std::string::npos) << faults;
  EXPECT_NE(faults.find("start node 2 again (pid"), std::string::npos) << faults;
  // Decode instance 0 is node 2: requests that came once it was back completed there.
  EXPECT_GT(completed_on_decode_0_after(run_dir, 1500), 0u) << "node 2's new process took requests";
}

// Slow, that is, not in the default suite (crescent_up_slow_tests), until it has shown itself
// dependable under load: beside other tests it failed 1 run in 3 while a rejoin could wait
// join_timeout_ms (20 s here) for the lost process, which answered the watch in the moment it
// ran again and then started afresh (docs/faults.md). With a rejoin's shorter wait it passed
// 10 runs of 10 by hand and 7 of 8 as a test beside other suites; the one failure was this
// test's window, since moved later.
#if CRESCENT_UP_SLOW
TEST_F(up, a_node_paused_past_the_connection_timeout_is_taken_back_and_gated_by_its_new_actors) {
  run_dir = dir / "run";
  // CAF's heartbeats every 200 ms; a connection silent for 1 s is closed. Decode node 2 is
  // stopped for 2.5 s: the main process closes its connection and fails its requests; resumed,
  // the node finds its cluster gone, starts afresh at its port, and the main process takes it
  // back. While it is stopped its kernel still accepts connections: the watch must not take
  // that for an answer (before it waited for the node's first bytes, 1 run in 3 to 6 left the
  // node out).
  close_silent_connections_after_1_s("heartbeat_interval_ms: 100\n"
                                     "conductor: {heartbeat_timeout_ms: 600}\n"
                                     "rejoin_interval_ms: 200\n");
  // From 3.5 s the node agent's heartbeats are dropped for 2.5 s. The fault names a role, and
  // the process's actors started afresh have new ids: the gates must learn them at the rejoin
  // (before, they knew bring-up's actors only, and the beats passed).
  const auto report = run_faults_to_end(
      "  - {at_ms: 200, pause: 2, for_ms: 2500}\n"
      "  - {at_ms: 6000, drop: 1.0, type: heartbeat, from: node_agent, node: 2, for_ms: 2500}\n",
      "320");
  // Taken back by about 3 s, or 5 s where its lost process answered the watch first (a rejoin
  // then waits 2 s for a join that never comes). Silent from about 6.6 s (the last beat, then
  // the timeout) to about 8.5 s; margins at each end.
  const auto [silent, silent_on_2] = arrived_between(run_dir, 6900, 8200);
  EXPECT_GT(silent, 0u);
  EXPECT_EQ(silent_on_2, 0u) << "placed on node 2 while its new agent's beats were dropped";
  expect_node_2_taken_back(report, 9000);
}
#endif

TEST_F(up, a_node_whose_heartbeats_are_dropped_goes_silent_and_serves_again) {
  run_dir = dir / "run";
  // Only node 2's heartbeats are lost, for 3 s: the node runs on, but the conductor hears
  // nothing for longer than its timeout and places nothing there (its decode instance is 0)
  // until heartbeats come through again.
  std::ofstream{cluster, std::ios::app} << "heartbeat_interval_ms: 100\n"
                                           "conductor: {heartbeat_timeout_ms: 600}\n";
  std::ofstream{dir / "plan.yaml"}
      << "faults:\n  - {at_ms: 200, drop: 1.0, type: heartbeat, node: 2, for_ms: 3000}\n";
  auto p = start({"--requests", "160", "--speedup", "8", "--faults", (dir / "plan.yaml").string()});
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(std::chrono::seconds(120));
  ASSERT_TRUE(status) << describe(status.error());
  const auto report = read_file(run_dir / "report.txt");
  EXPECT_NE(report.find("invariants    held: 160 of 160"), std::string::npos) << report;
  const auto faults = read_file(run_dir / "faults.log");
  EXPECT_NE(faults.find("drop 100% of 'heartbeat' messages to or from node 2 for 3000 ms"),
            std::string::npos)
      << faults;
  // Silent from about 800 ms (the last beat, then the timeout) to about 3300 ms; half a second
  // of margin at each end.
  std::ifstream lines{run_dir / "requests.jsonl"};
  size_t silent = 0, silent_on_2 = 0, served_after = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto at = line.find("\"arrival_ms\":");
    ASSERT_NE(at, std::string::npos) << line;
    const double arrival_ms = std::stod(line.substr(at + 13));
    const bool on_2 = line.find("\"decode_instance\":0") != std::string::npos;
    if (arrival_ms > 1300 && arrival_ms < 2800) {
      ++silent;
      silent_on_2 += on_2 ? 1 : 0;
    }
    if (arrival_ms > 3800 && on_2 && line.find("\"status\":\"completed\"") != std::string::npos)
      ++served_after;
  }
  EXPECT_GT(silent, 0u);
  EXPECT_EQ(silent_on_2, 0u) << "placed on node 2 while the conductor heard nothing from it";
  EXPECT_GT(served_after, 0u) << "node 2 took requests again once its heartbeats came through";
  EXPECT_NE(report.find("messages      "), std::string::npos) << report;
  for (auto pid : pids_of(run_dir))
    EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
}

TEST_F(up, sigint_tears_every_process_down) {
  EXPECT_EQ(interrupted({"--requests", "3000"}), 130);
  const auto pids = pids_of(run_dir);
  ASSERT_EQ(pids.size(), 3u);
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

TEST_F(up, delayed_duplicated_and_reordered_messages_between_processes_break_no_invariant) {
  run_dir = dir / "run";
  // Without --netns, message faults run in a gate per node process, on whole CAF messages.
  const auto report = run_faults(
      "  - {at_ms: 0, delay: 0.2, delay_ms: 30, type: tokens, from: decode, to: request}\n"
      "  - {at_ms: 0, duplicate: 0.1, for_ms: 60000}\n"
      "  - {at_ms: 0, reorder: 0.05, delay_ms: 20, for_ms: 60000}\n");
  unsigned long long frames = 0, dropped = 0, delayed = 0, duplicated = 0, reordered = 0;
  const auto at = report.find("messages      ");
  ASSERT_NE(at, std::string::npos) << report;
  ASSERT_EQ(std::sscanf(report.c_str() + at,
                        "messages      %llu through the message gates: %llu dropped, %llu "
                        "delayed, %llu duplicated, %llu reordered",
                        &frames, &dropped, &delayed, &duplicated, &reordered),
            5)
      << report;
  EXPECT_GT(delayed, 0u) << report;
  EXPECT_GT(duplicated, 0u) << report;
  EXPECT_GT(reordered, 0u) << report;
  EXPECT_EQ(dropped, 0u) << report;
  EXPECT_LT(delayed + duplicated + reordered, frames) << report;
  const auto faults = read_file(run_dir / "faults.log");
  EXPECT_NE(faults.find("delay 20% of 'tokens' messages from decode to request by 30 ms [message "
                        "gates] (2 gates)"),
            std::string::npos)
      << faults;
  for (auto pid : pids_of(run_dir))
    EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
}

TEST_F(up, failed_corrupted_and_delayed_kv_slices_in_every_process_break_no_invariant) {
  run_dir = dir / "run";
  // The launcher passes the node processes' transfer-fault flags on.
  auto text = read_file(cluster);
  const std::string plain = "--node {node}\"";
  ASSERT_NE(text.find(plain), std::string::npos);
  text.replace(text.find(plain), plain.size(), "--node {node} {faults}\"");
  std::ofstream{cluster} << text;
  // A slice whose every attempt was taken fails its request with the reason; none may be lost,
  // decode other tokens (the hand-off's and the pool's slices are checked), or leave a page.
  // A delayed slice (held 5 ms in its engine's delay line) only makes its request later.
  const auto report = run_faults("  - {at_ms: 0, fail_transfer: 0.2}\n"
                                 "  - {at_ms: 0, corrupt: 0.2, for_ms: 60000}\n"
                                 "  - {at_ms: 0, delay_transfer: 0.2, delay_ms: 5}\n");
  EXPECT_NE(report.find("settled       "), std::string::npos) << report;
  unsigned long long failed = 0, corrupted = 0, delayed = 0;
  const auto at = report.find("transfer      ");
  ASSERT_NE(at, std::string::npos) << report;
  ASSERT_EQ(std::sscanf(report.c_str() + at,
                        "transfer      %llu KV slice attempts failed, %llu corrupted, %llu delayed",
                        &failed, &corrupted, &delayed),
            3)
      << report;
  EXPECT_GT(failed, 0u) << report;
  EXPECT_GT(corrupted, 0u) << report;
  EXPECT_GT(delayed, 0u) << report;
  for (const auto* node : {"node-1.log", "node-2.log"})
    EXPECT_NE(read_file(run_dir / node).find("transfer faults: "), std::string::npos) << node;
  const auto faults = read_file(run_dir / "faults.log");
  EXPECT_NE(faults.find("fail 20% of KV slices [3 processes]"), std::string::npos) << faults;
  EXPECT_NE(faults.find("end of the run: end: fail 20% of KV slices [3 processes]"),
            std::string::npos)
      << faults;
  for (auto pid : pids_of(run_dir))
    EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
}

// --netns: node processes in network namespaces, faults as packets the kernel drops.
class up_netns : public up {
 protected:
  void SetUp() override {
    if (auto why = ::crescent::up::netns_network::available())
      GTEST_SKIP() << describe(why);
    up::SetUp();
    // Heartbeats every 100 ms, silence after 600 ms (as the pause test above).
    std::ofstream{cluster, std::ios::app} << "heartbeat_interval_ms: 100\n"
                                             "conductor: {heartbeat_timeout_ms: 600}\n";
  }

  // No namespace or bridge of the run is left: its names carry the main process's id.
  void expect_no_network_left() {
    const auto pids = pids_of(run_dir);
    ASSERT_FALSE(pids.empty());
    const auto main = std::to_string(pids.front());
    for (const char* n : {"1", "2"})
      EXPECT_FALSE(std::filesystem::exists("/var/run/netns/crescent-" + main + "-n" + n))
          << "namespace of node " << n << " left behind";
    EXPECT_FALSE(
        std::filesystem::exists("/sys/class/net/crbr" + std::to_string(pids.front() % 100000)))
        << "bridge left behind";
    for (auto pid : pids)
      EXPECT_TRUE(gone(pid)) << "process " << pid << " is still there";
  }

  // Runs `requests` at 8x under the plan `faults`; its exit status, or -1 (failure added).
  int run_plan(const std::string& faults, const std::string& requests) {
    run_dir = dir / "run";
    std::ofstream{dir / "plan.yaml"} << "faults:\n  - " << faults << "\n";
    auto p = start({"--netns", "--requests", requests, "--speedup", "8", "--faults",
                    (dir / "plan.yaml").string()});
    EXPECT_TRUE(p) << describe(p.error());
    if (!p)
      return -1;
    auto status = p->wait_exit(std::chrono::seconds(120));
    EXPECT_TRUE(status) << describe(status.error());
    return status ? *status : -1;
  }
};

TEST_F(up_netns, a_partitioned_node_fails_its_requests_in_time_and_serves_again) {
  const int status = run_plan("{at_ms: 200, partition: [2], for_ms: 2000}", "80");
  const auto report = read_file(run_dir / "report.txt");
  EXPECT_EQ(status, 1) << "requests on the cut node fail\n" << report << read_file(dir / "up.err");
  EXPECT_NE(report.find("x node 2 went silent: no heartbeat for 600 ms"), std::string::npos)
      << report;
  EXPECT_NE(report.find("invariants    held: 80 of 80"), std::string::npos) << report;
  EXPECT_NE(report.find("settled       the conductor counts every node not killed or lost as live"),
            std::string::npos)
      << "node 2 heartbeats again once the partition ends\n"
      << report;
  const auto faults = read_file(run_dir / "faults.log");
  EXPECT_NE(faults.find("cut node 2 from the others for 2000 ms"), std::string::npos) << faults;
  EXPECT_NE(faults.find("end: cut node 2"), std::string::npos) << faults;
  // The nodes' addresses were their namespaces', and KV went over TCP between them.
  const auto used = read_file(run_dir / "cluster.yaml");
  EXPECT_NE(used.find("address: \"10.213."), std::string::npos) << used;
  EXPECT_NE(used.find("shm: false"), std::string::npos) << used;
  expect_no_network_left();
}

TEST_F(up_netns, a_node_cut_off_past_the_connection_timeout_is_taken_back_once_reachable) {
  // CAF's heartbeats every 200 ms; a connection silent for 1 s is closed on both sides. The node
  // cut off for 2.5 s sees its cluster gone, starts afresh and waits; once the partition ends
  // the main process finds it listening and takes it back.
  close_silent_connections_after_1_s("rejoin_interval_ms: 200\n");
  const int status = run_plan("{at_ms: 200, partition: [2], for_ms: 2500}", "240");
  const auto report = read_file(run_dir / "report.txt");
  EXPECT_EQ(status, 1) << "requests on the cut node fail\n" << report << read_file(dir / "up.err");
  EXPECT_NE(report.find("invariants    held: 240 of 240"), std::string::npos) << report;
  expect_node_2_taken_back(report, 5000);
  expect_no_network_left();
}

TEST_F(up_netns, a_node_cut_off_past_the_connection_timeout_ends_where_it_may_not_wait) {
  // As above with rejoin_wait_ms 0: the node cut off for 4 s sees its cluster gone and ends;
  // the main process counts it lost.
  close_silent_connections_after_1_s("rejoin_wait_ms: 0\n");
  const int status = run_plan("{at_ms: 200, partition: [2], for_ms: 4000}", "80");
  const auto report = read_file(run_dir / "report.txt");
  EXPECT_EQ(status, 1) << "requests on the cut node fail\n" << report << read_file(dir / "up.err");
  EXPECT_NE(report.find("lost          node 2: its process ended during the run"),
            std::string::npos)
      << report;
  EXPECT_NE(report.find("invariants    held: 80 of 80"), std::string::npos) << report;
  EXPECT_NE(report.find("settled       the conductor counts every node not killed or lost as "
                        "live"),
            std::string::npos)
      << report;
  EXPECT_NE(read_file(run_dir / "node-2.log").find("main process went away"), std::string::npos)
      << "the node says its conductor is gone\n"
      << read_file(run_dir / "node-2.log");
  expect_no_network_left();
}

TEST_F(up_netns, packet_loss_between_a_node_and_the_main_process_loses_no_request) {
  const int status = run_plan("{at_ms: 0, drop: 0.05, node: 2, peer: main}", "40");
  const auto report = read_file(run_dir / "report.txt");
  // TCP sends a dropped packet again: messages come late, none is lost.
  EXPECT_EQ(status, 0) << report << read_file(dir / "up.err");
  EXPECT_NE(report.find("requests      completed 40"), std::string::npos) << report;
  EXPECT_NE(report.find("invariants    held: 40 of 40"), std::string::npos) << report;
  EXPECT_NE(read_file(run_dir / "faults.log").find("end of the run: end: drop 5%"),
            std::string::npos);
  expect_no_network_left();
}

TEST_F(up_netns, delayed_and_duplicated_messages_pass_through_gates_beside_the_namespaces) {
  // The message gates run in the main process's namespace and reach each node over the bridge.
  std::ofstream{dir / "plan.yaml"}
      << "faults:\n"
         "  - {at_ms: 0, delay: 0.2, delay_ms: 30, type: tokens, from: decode, to: request}\n"
         "  - {at_ms: 0, duplicate: 0.1, for_ms: 60000}\n"
         "  - {at_ms: 0, drop: 0.05, node: 2, peer: main}\n";
  run_dir = dir / "run";
  auto p = start(
      {"--netns", "--requests", "40", "--speedup", "8", "--faults", (dir / "plan.yaml").string()});
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(std::chrono::seconds(120));
  ASSERT_TRUE(status) << describe(status.error());
  const auto report = read_file(run_dir / "report.txt");
  // A request may fail with its reason, as without --netns; none may be lost or decode wrongly.
  // (Until the prefill workers refused a second copy of a job, 1 run in 3 failed one here: the
  // copy ran after the first had handed its KV off, into revoked pages, "no registered region";
  // chaos.a_prefill_job_delivered_twice_runs_once_and_fails_no_request. 7 runs since: 40 of 40.)
  EXPECT_TRUE(*status == 0 || *status == 1) << report << read_file(dir / "up.err");
  EXPECT_NE(report.find("invariants    held: 40 of 40"), std::string::npos) << report;
  unsigned long long frames = 0, dropped = 0, delayed = 0, duplicated = 0;
  const auto at = report.find("messages      ");
  ASSERT_NE(at, std::string::npos) << report;
  ASSERT_EQ(std::sscanf(report.c_str() + at,
                        "messages      %llu through the message gates: %llu dropped, %llu "
                        "delayed, %llu duplicated",
                        &frames, &dropped, &delayed, &duplicated),
            4)
      << report;
  EXPECT_EQ(dropped, 0u) << "with --netns a drop is of packets, not in the gates";
  EXPECT_GT(delayed, 0u) << report;
  EXPECT_GT(duplicated, 0u) << report;
  const auto faults = read_file(run_dir / "faults.log");
  EXPECT_NE(faults.find("[message gates]"), std::string::npos) << faults;
  EXPECT_NE(faults.find("[nftables]"), std::string::npos) << faults;
  expect_no_network_left();
}

TEST_F(up_netns, sigint_removes_the_namespaces_too) {
  EXPECT_EQ(interrupted({"--netns", "--requests", "3000"}), 130);
  expect_no_network_left();
}

TEST_F(up_netns, a_link_rate_limits_each_node_link_both_ways) {
  std::string ns;
  {
    auto net = ::crescent::up::netns_network::create({1, 2}, dir.string(), 250);
    ASSERT_TRUE(net) << describe(net.error());
    ns = (*net)->namespace_of(2);
    // What the node sends: its end of the pair, in its namespace.
    for (uint32_t n : {1u, 2u}) {
      const auto inside =
          run_shell("ip netns exec " + (*net)->namespace_of(n) + " tc qdisc show dev eth0").output;
      EXPECT_NE(inside.find("tbf"), std::string::npos) << inside;
      EXPECT_NE(inside.find("rate 250Mbit"), std::string::npos) << inside;
    }
    // What it receives: the bridge's end, in this namespace.
    const auto outside = run_shell("tc qdisc show dev " + (*net)->bridge_end_of(2)).output;
    EXPECT_NE(outside.find("rate 250Mbit"), std::string::npos) << outside;
  }
  EXPECT_FALSE(std::filesystem::exists("/var/run/netns/" + ns)) << "namespace left behind";
  EXPECT_FALSE(
      ::crescent::up::netns_network::create({2}, dir.string(), ::crescent::up::link_mbit_max + 1))
      << "a rate over the limit is refused";
}

TEST_F(up_netns, requests_complete_over_limited_links_and_the_report_says_the_rate) {
  run_dir = dir / "run";
  const auto out =
      run_to_end({"--netns", "--link-mbit", "100", "--requests", "6", "--speedup", "8"}, 0);
  EXPECT_NE(out.find("its link 100 Mbit/s each way"), std::string::npos) << out;
  EXPECT_NE(out.find("requests      completed 6"), std::string::npos) << out;
  expect_no_network_left();
}

TEST_F(up, a_link_rate_without_namespaces_is_refused_with_the_reason) {
  run_dir = dir / "run";
  auto p = start({"--link-mbit", "100", "--requests", "1"});
  ASSERT_TRUE(p) << describe(p.error());
  auto status = p->wait_exit(std::chrono::seconds(30));
  ASSERT_TRUE(status) << describe(status.error());
  EXPECT_NE(*status, 0);
  const auto err = read_file(dir / "up.err");
  EXPECT_NE(err.find("--link-mbit requires --netns"), std::string::npos) << err;
  EXPECT_FALSE(std::filesystem::exists(run_dir)) << "nothing was started";
}

} // namespace
} // namespace crescent::testing
