// The `crescent` binary, run as a separate process: bad configs, traces and flags end with a
// clear message and a non-zero exit; a tiny run succeeds.
#include "support/shell.hpp"

#include <gtest/gtest.h>

#include <sched.h>
#include <sys/wait.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {

using process_result = crescent::testing::shell_result;
using crescent::testing::run_shell;

process_result run(const std::string& args) {
  return run_shell(std::string{CRESCENT_BINARY} + " " + args + " 2>&1");
}

std::string write_file(const std::string& name, const std::string& text) {
  auto path = ::testing::TempDir() + name;
  std::ofstream{path} << text;
  return path;
}

const std::string trace = CRESCENT_TEST_DATA_DIR "/trace_head.jsonl";

TEST(cli, malformed_trace_line_names_the_line) {
  auto path =
      write_file("cli_bad.jsonl",
                 R"({"timestamp": 0, "input_length": 512, "output_length": 1, "hash_ids": [1]})"
                 "\n{\"timestamp\": 1, \"input_length\": oops}\n");
  auto r = run("run --no-progress --trace " + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(path + ":2: not valid JSON"), std::string::npos) << r.output;
}

TEST(cli, bad_config_names_the_field) {
  auto path = write_file("cli_bad.yaml", "decode:\n  batch_max: 0\n");
  auto r = run("run --no-progress --trace " + trace + " --config " + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("decode.batch_max"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(":2"), std::string::npos) << r.output;
}

TEST(cli, bad_flags_are_refused) {
  // A bad flag is a run that could not start: 2, whatever CLI11 found wrong with it.
  EXPECT_EQ(run("run --requests 0").status, 2);
  EXPECT_EQ(run("run --speedup nope").status, 2);
  EXPECT_EQ(run("frobnicate").status, 2);
  EXPECT_EQ(run("run --help").status, 0);
  EXPECT_NE(run("run --trace /nonexistent.jsonl --no-progress").status, 0);
}

// The default trace, data/synthetic_trace.jsonl, is relative to the current directory: from
// anywhere but the repository root the message says what it tried and to pass --trace.
TEST(cli, a_missing_default_trace_says_where_it_looked) {
  auto r = run_shell("cd " + ::testing::TempDir() + " && " + CRESCENT_BINARY +
                     " run --no-progress 2>&1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("the default trace data/synthetic_trace.jsonl is not there (tried /"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("pass --trace FILE"), std::string::npos) << r.output;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in{text};
  for (std::string line; std::getline(in, line);)
    out.push_back(line);
  return out;
}

// A header, a column line, then one row per capacity in the order given: capacity, hit rate
// with 4 decimals, reused and prompt tokens.
TEST(cli, analyze_hitrate_prints_a_row_per_capacity) {
  auto r = run("analyze hitrate " + trace + " --capacity-tokens unbounded 100000 0");
  ASSERT_EQ(r.status, 0) << r.output;
  const auto lines = lines_of(r.output);
  ASSERT_EQ(lines.size(), 5u) << r.output;
  EXPECT_NE(lines[0].find("40 requests from " + trace), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("512-token blocks"), std::string::npos) << lines[0];
  EXPECT_EQ(lines[1], "capacity (tokens)  hit rate   reused tokens   prompt tokens");
  const std::regex row{R"( *(unbounded|\d+)  +(0|1)\.\d{4}  +(\d+)  +(\d+))"};
  const char* capacities[] = {"unbounded", "100000", "unbounded"};
  std::string prompt_tokens;
  for (size_t i = 0; i < 3; ++i) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(lines[2 + i], m, row)) << lines[2 + i];
    EXPECT_EQ(m[1], capacities[i]);
    EXPECT_LE(std::stoull(m[3]), std::stoull(m[4])) << "reused <= prompt tokens";
    if (i == 0)
      prompt_tokens = m[4];
    EXPECT_EQ(m[4], prompt_tokens) << "every row counts the same prompts";
  }
  EXPECT_EQ(lines[2], lines[4]) << "0 is unbounded";

  auto json = run("analyze hitrate " + trace + " --capacity-tokens 100000 --json");
  ASSERT_EQ(json.status, 0) << json.output;
  for (const std::string& field :
       {std::string{"\"requests\": 40"}, std::string{"\"block_tokens\": 512"},
        std::string{"\"capacity_tokens\": 100000"}, std::string{"\"hit_rate\": "},
        std::string{"\"reused_tokens\": "}, "\"prompt_tokens\": " + prompt_tokens})
    EXPECT_NE(json.output.find(field), std::string::npos) << field << "\n" << json.output;
  EXPECT_EQ(json.output.front(), '{') << json.output;
}

TEST(cli, analyze_hitrate_refuses_bad_arguments_and_traces) {
  auto r = run("analyze hitrate " + trace + " --capacity-tokens 1000 --block-tokens 300");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("crescent analyze hitrate: invalid_argument: --block-tokens 300: must "
                          "divide the trace's 512-token blocks"),
            std::string::npos)
      << r.output;
  r = run("analyze hitrate /nonexistent/trace.jsonl --capacity-tokens 1000");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot read trace file /nonexistent/trace.jsonl"), std::string::npos)
      << r.output;
  auto bad = write_file("cli_hitrate_bad.jsonl",
                        R"({"timestamp": 0, "input_length": 512, "output_length": 1, )"
                        R"("hash_ids": [1]})"
                        "\n{\"timestamp\": 1, \"input_length\": oops}\n");
  r = run("analyze hitrate " + bad + " --capacity-tokens unbounded");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(bad + ":2: not valid JSON"), std::string::npos) << r.output;
  r = run("analyze hitrate " + trace + " --capacity-tokens 10k");
  EXPECT_NE(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("expected a non-negative integer or unbounded"), std::string::npos)
      << r.output;
  EXPECT_NE(run("analyze hitrate " + trace).status, 0) << "--capacity-tokens is required";
  EXPECT_NE(run("analyze hitrate " + trace + " --capacity-tokens").status, 0);
  EXPECT_NE(run("analyze").status, 0);
}

TEST(cli, node_processes_refuse_bad_flags_and_clusters_without_them_fail_to_start) {
  auto plain = write_file("cli_nodes.yaml", "nodes: [{prefill: 1}, {decode: 1}]\n");
  auto r = run("node --config " + plain + " --node 9");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--node 9: the cluster file has 2 nodes"), std::string::npos) << r.output;
  r = run("node --config " + plain + " --node 1");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("has no address: give --port"), std::string::npos) << r.output;
  EXPECT_NE(run("node --node 1").status, 0) << "--config is required";
  EXPECT_NE(run("node --config " + plain + " --node 1 --port 70000").status, 0);
  auto ssd = write_file("cli_ssd.yaml", "nodes: [{prefill: 1}, {decode: 1, ssd_mib: 4}]\n");
  r = run("node --config " + ssd + " --node 1 --port 0");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("node 1 has an SSD tier but no directory for it"), std::string::npos)
      << r.output;
  // Port 1 on loopback: nobody listens there, so bring-up ends after join_timeout_ms.
  auto hosted =
      write_file("cli_hosted.yaml", "nodes: [{prefill: 1}, {decode: 1, address: '127.0.0.1:1'}]\n"
                                    "join_timeout_ms: 200\n");
  r = run("run --no-progress --requests 1 --trace " + trace + " --config " + hosted);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("node 1 at 127.0.0.1:1: no `crescent node` process answered"),
            std::string::npos)
      << r.output;
}

TEST(cli, a_small_run_completes_and_reports) {
  auto r = run("run --no-progress --requests 6 --speedup 100 --output-scale 0.05 --trace " + trace);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("completed 6"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("TTFT ms"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prefix hits"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("x0.03125"), std::string::npos) << "the scale is shown";
  // The one-process cluster hands KV from prefill to decode over the engine's in-process path.
  EXPECT_NE(r.output.find("KV moved      local to node "), std::string::npos) << r.output;
}

} // namespace

// The cuda rows of the transfer benchmark run where there is a GPU, and elsewhere say why not;
// either way the benchmark ends well.
TEST(cli, replay_sim_runs_the_paper_cluster_and_writes_its_report) {
  const auto report = ::testing::TempDir() + "cli_replay.json";
  const auto messages = ::testing::TempDir() + "cli_replay.tsv";
  auto r = run("replay " + trace + " --sim --requests 12 --no-progress --report " + report +
               " --messages " + messages);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"requests      completed 12", "SLO           TTFT <= 30 s", "effective",
                           "hit rate", "prefill GPU", "stream hash", "x real time", "peak RSS"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  std::ifstream json{report};
  std::stringstream text;
  text << json.rdbuf();
  EXPECT_NE(text.str().find("\"per_request\""), std::string::npos);
  std::ifstream log{messages};
  std::string header;
  std::getline(log, header);
  EXPECT_EQ(header, "# crescent messages 1: time_ns sender receiver type bytes");
}

TEST(cli, replay_refuses_what_it_cannot_run) {
  auto r = run("replay " + trace);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("add --sim"), std::string::npos) << r.output;

  auto bad_cluster = write_file("cli_sim_bad.yaml", "engine:\n  kind: modeled\n  profile: x\n");
  r = run("replay " + trace + " --sim --cluster " + bad_cluster);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("profile 'x' is neither a built-in one"), std::string::npos) << r.output;

  auto typo = write_file("cli_sim_typo.yaml", "model:\n  block_tokens: 512\n  layer: 80\n");
  r = run("replay " + trace + " --sim --cluster " + typo);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(typo + ":3: model.layer: unknown field"), std::string::npos) << r.output;

  auto bad_trace = write_file("cli_sim_bad.jsonl", "{\"timestamp\": 0}\n");
  r = run("replay " + bad_trace + " --sim");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(bad_trace + ":1:"), std::string::npos) << r.output;

  r = run("replay " + trace + " --sim --speedup 0");
  EXPECT_NE(r.status, 0) << r.output;

  // The reference engine with measured timing would read the wall clock.
  r = run("replay " + trace + " --sim --cluster " CRESCENT_SOURCE_DIR "/docs/cluster.example.yaml");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("engine.timing: measured reads the wall clock"), std::string::npos)
      << r.output;
}

TEST(cli, replay_prints_the_paper_cluster_as_a_cluster_file) {
  auto r = run("replay --print-cluster");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("profile: \"llama3-70b-8xa800\""), std::string::npos) << r.output;
  auto path = write_file("cli_printed.yaml", r.output);
  auto again = run("replay --print-cluster --cluster " + path);
  ASSERT_EQ(again.status, 0) << again.output;
  // The same fields: only the comment line naming where it came from differs.
  EXPECT_EQ(r.output.substr(r.output.find('\n')), again.output.substr(again.output.find('\n')));
}

TEST(cli, replay_runs_the_coupled_baseline_and_prints_it) {
  auto r = run("replay " + trace + " --sim --requests 12 --no-progress --coupled chunked-prefill");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line :
       {"built-in coupled paper cluster (chunked-prefill)", "requests      completed 12",
        "KV hand-off   none: coupled", "its share of the steps"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  // Printed, it is a cluster file that reads back the same.
  r = run("replay --print-cluster --coupled prefix-caching");
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("coupled: 1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("prefix_caching: true"), std::string::npos) << r.output;
  auto path = write_file("cli_coupled.yaml", r.output);
  auto again = run("replay --print-cluster --cluster " + path);
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(r.output.substr(r.output.find('\n')), again.output.substr(again.output.find('\n')));
  r = run("replay " + trace + " --sim --coupled vllm");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--coupled: expected prefill-first"), std::string::npos) << r.output;
  r = run("replay " + trace + " --sim --coupled prefill-first --cluster " + path);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cannot go with --cluster"), std::string::npos) << r.output;
}

TEST(cli, run_serves_on_coupled_instances_in_real_time) {
  auto cluster = write_file("cli_coupled_real.yaml",
                            "nodes: [{coupled: 1}, {coupled: 1}]\n"
                            "coupled: {chunked_prefill: true, token_budget: 128, "
                            "prefix_caching: true}\n"
                            "conductor: {policy: local_cache_aware, admission: none}\n");
  auto r = run("run --no-progress --requests 6 --trace " + trace + " --config " + cluster);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"2 coupled (chunked prefill, prefix caching)",
                           "requests      completed 6", "KV hand-off   none: coupled"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  r = run("run --no-progress --requests 6 --kv-send ab --trace " + trace + " --config " + cluster);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("coupled instances decode where they prefill"), std::string::npos)
      << r.output;
}

TEST(cli, run_with_a_kv_codec_says_so_and_a_bad_codec_names_the_field) {
  auto cluster = write_file("cli_codec.yaml", "kv_codec: kvquant4\n"
                                              "codec: {calibration_prompts: 2, "
                                              "calibration_prompt_tokens: 128}\n");
  auto r = run("run --no-progress --requests 6 --trace " + trace + " --config " + cluster);
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* line : {"kv_codec    kvquant4: pool blocks and the hand-off compressed",
                           "requests      completed 6"})
    EXPECT_NE(r.output.find(line), std::string::npos) << line << "\n" << r.output;
  auto bad = write_file("cli_codec_bad.yaml", "kv_codec: int3\n");
  r = run("run --no-progress --requests 6 --trace " + trace + " --config " + bad);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cli_codec_bad.yaml:1"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("kv_codec: expected none, int8"), std::string::npos) << r.output;
}

TEST(cli, real_time_commands_refuse_simulated_time_and_the_modeled_engine) {
  auto sim = write_file("cli_simulated.yaml", "simulated_time: true\n");
  auto r = run("run --no-progress --requests 1 --trace " + trace + " --config " + sim);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("crescent replay --sim"), std::string::npos) << r.output;
  auto modeled =
      write_file("cli_modeled.yaml", "engine: {kind: modeled, profile: llama3-70b-8xa800}\n"
                                     "model: {context_tokens_max: 8192}\n"
                                     "nodes: [{prefill: 1, pool_tokens: 100000},"
                                     " {decode: 1, pool_tokens: 100000}]\n"
                                     "decode: {kv_tokens: 100000}\n");
  r = run("run --no-progress --requests 1 --trace " + trace + " --config " + modeled);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("engine.kind"), std::string::npos) << r.output;
  r = run("node --node 0 --config " + modeled + " </dev/null");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("engine.kind"), std::string::npos) << r.output;
}

TEST(cli, profile_writes_a_profile_that_a_simulated_cluster_runs_on) {
  const auto profile = ::testing::TempDir() + "cli_profile.yaml";
  auto r = run("profile --quick --repeats 1 --no-warmup --out " + profile);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("rms relative error"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("warm-up after idle"), std::string::npos) << r.output;
  // The embedded default cluster, on the modeled engine with that profile.
  auto cluster =
      write_file("cli_profiled.yaml", "engine: {kind: modeled, profile: " + profile + "}\n");
  r = run("replay " + trace + " --sim --requests 5 --no-progress --cluster " + cluster);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("completed 5"), std::string::npos) << r.output;
  r = run("profile --out " + profile + " --config " + cluster);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("only the reference engine"), std::string::npos) << r.output;
}

TEST(cli, profile_writes_the_warmup_after_idle_and_the_ssd_and_a_simulation_reads_them) {
  const auto profile = ::testing::TempDir() + "cli_profile_warmup.yaml";
  auto r = run("profile --quick --repeats 1 --out " + profile);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("after      5 ms idle"), std::string::npos) << r.output;
  std::ifstream in{profile};
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_NE(text.str().find("warmup:"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("  idle_ms: [5, 50]"), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("  decode_extra_ns: ["), std::string::npos) << text.str();
  EXPECT_NE(text.str().find("  ssd_read_bytes_per_s: "), std::string::npos) << text.str();
  EXPECT_NE(r.output.find("SSD tier: a page ("), std::string::npos) << r.output;
  // The measured drive times a simulated SSD tier.
  auto cluster = write_file("cli_profiled_warmup.yaml",
                            "engine: {kind: modeled, profile: " + profile +
                                "}\nnodes: [{prefill: 1, ssd_mib: 4}, {decode: 1}]\n");
  r = run("replay " + trace + " --sim --requests 5 --no-progress --cluster " + cluster);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("completed 5"), std::string::npos) << r.output;
}

TEST(cli, bench_transfer_cuda_rows_run_or_say_why_not) {
  auto r = run("bench transfer --only cuda --quick --trials 1 --seconds 0.01 --warmup-seconds 0 "
               "--region-mib 64");
  EXPECT_EQ(r.status, 0) << r.output;
  if (r.output.find("cuda  skipped: unavailable: ") != std::string::npos) {
    EXPECT_NE(r.output.find("CUDA"), std::string::npos) << "the reason names CUDA\n" << r.output;
    return;
  }
  for (const char* local :
       {"cuda  cpu:0  write", "cuda  cpu:0  read", "cuda  cuda:0 write", "cuda  cuda:0 read"})
    EXPECT_NE(r.output.find(local), std::string::npos) << local << "\n" << r.output;
}

// The cuda engine: where there is no device, a cluster of it refuses to start and says why,
// and the GPU benchmark says why it skips; simulated time refuses it everywhere.
TEST(cli, the_cuda_engine_runs_or_says_why_not) {
  auto cuda = write_file("cli_cuda.yaml", "engine: {kind: cuda, device: 0}\n");
  auto r = run("replay " + trace + " --sim --no-progress --requests 1 --cluster " + cuda);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("engine.kind: cuda computes on a GPU"), std::string::npos) << r.output;
  auto bench = run("bench gpu --prompts 1 --prompt-tokens 16 --chunk-tokens 16 --decode-steps 1 "
                   "--pages 8 --rounds 1 --d-model 64 --heads 4 --kv-heads 2 --ffn 96 --vocab 64");
  EXPECT_EQ(bench.status, 0) << bench.output;
  if (bench.output.find("skipped: unavailable: ") == std::string::npos) {
    EXPECT_NE(bench.output.find("greedy tokens equal: yes"), std::string::npos) << bench.output;
    return; // a GPU: the cluster test in crescent_system_tests runs it
  }
  r = run("run --no-progress --requests 1 --trace " + trace + " --config " + cuda);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("cluster bring-up: unavailable:"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("CUDA"), std::string::npos) << r.output;
}

// Row filters outside the grid are refused (bench_cases_test.cpp tests what they pick).
TEST(cli, bench_transfer_refuses_rows_outside_the_grid) {
  EXPECT_NE(run("bench transfer --block-kib 5").status, 0);
  EXPECT_NE(run("bench transfer --threads 3").status, 0);
  EXPECT_NE(run("bench transfer --batch 17").status, 0);
  EXPECT_NE(run("bench transfer --op copy").status, 0);
  EXPECT_NE(run("bench transfer --warmup-seconds -1").status, 0);
}

// The CPUs this process may run on.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &set))
        out.push_back(cpu);
  return out;
}

const std::string tiny_cuda_run = "bench transfer --only cuda --quick --trials 1 --seconds 0.01 "
                                  "--warmup-seconds 0 --region-mib 64 ";

// --cpus pins both processes of the transfer benchmark: the header says where each process
// runs as each reports it (the peer in its greeting), not what was asked.
TEST(cli, bench_transfer_pins_its_processes_where_cpus_says) {
  const auto allowed = allowed_cpus();
  if (allowed.size() < 2)
    GTEST_SKIP() << "this process may run on " << allowed.size() << " CPU: none to pin apart";
  const auto client = std::to_string(allowed.front());
  const auto peer = std::to_string(allowed.back());
  auto r = run(tiny_cuda_run + "--cpus " + client + ":" + peer);
  EXPECT_EQ(r.status, 0) << r.output;
  const auto where = "processes: this one on CPUs " + client + ", the peer on CPUs " + peer +
                     " (--cpus " + client + ":" + peer + ")";
  EXPECT_NE(r.output.find(where), std::string::npos) << r.output;

  auto free = run(tiny_cuda_run + "--cpus none");
  EXPECT_EQ(free.status, 0) << free.output;
  EXPECT_NE(free.output.find("processes: placed by the kernel (--cpus none): this one may run on "
                             "CPUs "),
            std::string::npos)
      << free.output;
}

// A bad --cpus is refused, with the reason, before anything starts (cpu_sets_test.cpp tests
// the lists themselves).
TEST(cli, bench_transfer_refuses_a_bad_cpus) {
  const auto allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  int outside = 0;
  while (std::find(allowed.begin(), allowed.end(), outside) != allowed.end())
    ++outside;
  const auto first = std::to_string(allowed.front());
  const std::pair<std::string, std::string> cases[] = {
      {"0", "expected auto, none or CLIENT:PEER"},
      {"0:", "CPU list \"\": "},
      {"0:1024", "CPU 1024 is past the last"},
      {"1-0:0", "runs backwards"},
      {first + ":" + first, "is in both lists"},
      {first + ":" + std::to_string(outside),
       "CPU " + std::to_string(outside) + " is not one this process may use"},
  };
  for (const auto& [bad, why] : cases) {
    auto refused = run("bench transfer --cpus " + bad);
    EXPECT_EQ(refused.status, 2) << bad << "\n" << refused.output;
    EXPECT_NE(refused.output.find("bench transfer: --cpus: invalid_argument: "), std::string::npos)
        << refused.output;
    EXPECT_NE(refused.output.find(why), std::string::npos) << refused.output;
  }
  auto peer = run("transfer-peer --cpus x </dev/null");
  EXPECT_EQ(peer.status, 2) << peer.output;
  EXPECT_NE(peer.output.find("transfer-peer: --cpus: invalid_argument: CPU list \"x\""),
            std::string::npos)
      << peer.output;
}

std::string read_all(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(cli, chaos_runs_seeds_and_refuses_bad_budgets_plans_and_flags) {
  const std::string head = " --trace " + trace;
  auto r = run("chaos --seeds 2 --first 5 --requests 4 --verbose" + head);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("seed 5: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 seeds, "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("0 seeds violated an invariant"), std::string::npos) << r.output;
  r = run("chaos --seeds 2 --requests 4 --jobs 2" + head);
  EXPECT_EQ(r.status, 0) << r.output;
  EXPECT_NE(r.output.find("2 seeds, "), std::string::npos) << r.output;
  auto budget = write_file("cli_budget.yaml", "budget:\n  kinds: [drop, explode]\n");
  r = run("chaos --seeds 1 --requests 4 --faults " + budget + head);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(budget + ":2: budget.kinds: 'explode' is not a fault kind"),
            std::string::npos)
      << r.output;
  r = run("chaos --seeds 0" + head);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--seeds"), std::string::npos) << r.output;
  r = run("chaos --seeds 1 --faults-log" + head);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--faults-log requires --verbose"), std::string::npos) << r.output;
  auto modeled = write_file("cli_chaos_modeled.yaml",
                            "engine: {kind: modeled, profile: llama3-70b-8xa800}\n"
                            "model: {block_tokens: 256, context_tokens_max: 262144}\n"
                            "nodes:\n  - {prefill: 1, pool_tokens: 100000}\n"
                            "  - {decode: 1, pool_tokens: 100000}\n"
                            "decode: {kv_tokens: 200000}\n");
  r = run("chaos --seeds 1 --requests 4 --cluster " + modeled + head);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("needs engine.kind: reference"), std::string::npos) << r.output;
  // A plan for simulated time: replay --sim takes it, crescent up refuses the kinds it lacks.
  auto plan = write_file("cli_plan.yaml", "faults:\n  - {at_ms: 0, drop: 0.5, node: 20}\n");
  r = run("replay " + trace + " --sim --requests 4 --no-progress --faults " + plan);
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find(plan + ":2: node 20 is not in the cluster (16 nodes)"), std::string::npos)
      << r.output;
}

TEST(cli, experiment_help_lists_the_experiments) {
  auto r = run("experiment --help");
  ASSERT_EQ(r.status, 0) << r.output;
  for (const char* name :
       {"capacity", "local-vs-global", "policies", "replicas", "bandwidth", "pd-ratio", "overload",
        "scale", "Fig. 9", "Fig. 10", "Fig. 5", "Fig. 11", "effective-capacity", "Figs. 1, 6, 7",
        "prefill-time", "Fig. 8"})
    EXPECT_NE(r.output.find(name), std::string::npos) << name << "\n" << r.output;
}

TEST(cli, experiment_refuses_bad_names_seeds_traces_and_out_dirs) {
  const auto out = ::testing::TempDir() + "cli_experiment_refused";
  const std::pair<std::string, std::string> cases[] = {
      {"experiment nope --out " + out,
       "unknown experiment 'nope'; the experiments: capacity, local-vs-global, policies"},
      {"experiment capacity --seed 0 --out " + out, "--seed 0: expected a positive integer"},
      {"experiment capacity --seed 12x --out " + out, "--seed 12x: expected a positive integer"},
      {"experiment capacity --trace /nonexistent/t.jsonl --out " + out,
       "cannot read trace file /nonexistent/t.jsonl"},
      {"experiment capacity --trace " + write_file("cli_experiment_empty.jsonl", "\n") + " --out " +
           out,
       "cli_experiment_empty.jsonl: no trace records"},
  };
  for (const auto& [args, why] : cases) {
    auto r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.output;
    EXPECT_NE(r.output.find("crescent experiment: "), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(why), std::string::npos) << args << "\n" << r.output;
  }
  // An out dir below a file cannot be made: refused before any simulation runs.
  const auto file = write_file("cli_experiment_file", "x");
  auto r = run("experiment capacity --trace " + trace + " --out " + file + "/sub");
  EXPECT_EQ(r.status, 2) << r.output;
  EXPECT_NE(r.output.find("--out " + file + "/sub: cannot create the directory"), std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("[experiment"), std::string::npos) << r.output;
}

// The cheapest experiment (one-node replays) twice into two dirs: the same JSON byte for byte,
// the markdown with its command, and the plot where matplotlib is.
TEST(cli, experiment_writes_the_same_json_twice_a_table_and_a_plot) {
  const bool plots = run_shell("/usr/bin/python3 -c 'import matplotlib' 2>&1").status == 0;
  const auto a = ::testing::TempDir() + "cli_experiment_a";
  const auto b = ::testing::TempDir() + "cli_experiment_b";
  const std::string args = "experiment capacity --no-progress --trace " + trace +
                           (plots ? "" : " --no-plots") + " --out ";
  auto first = run(args + a);
  ASSERT_EQ(first.status, 0) << first.output;
  auto second = run(args + b);
  ASSERT_EQ(second.status, 0) << second.output;
  const auto json = read_all(a + "/capacity.json");
  EXPECT_EQ(json, read_all(b + "/capacity.json"));
  for (const auto& field : std::vector<std::string>{
           "\"experiment\": \"capacity\"", "\"figure\": \"Fig. 9\"",
           "\"command\": \"crescent experiment capacity --trace " + trace + " --seed 1\"",
           "\"commit\": \"", "\"sequence_only\": [", "\"replayed\": ["})
    EXPECT_NE(json.find(field), std::string::npos) << field << "\n" << json;
  const auto md = read_all(a + "/capacity.md");
  EXPECT_NE(md.find("| capacity (tokens) | sequence-only | replayed |"), std::string::npos) << md;
  EXPECT_NE(md.find("`crescent experiment capacity --trace " + trace + " --seed 1`"),
            std::string::npos)
      << md;
  if (plots) {
    EXPECT_EQ(read_all(a + "/capacity.png").substr(1, 3), "PNG");
  }
  EXPECT_NE(first.output.find("| 1000000000 |"), std::string::npos) << first.output;
}
