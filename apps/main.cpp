// The `crescent` command line.
#include "apps/analyze/analyze_command.hpp"
#include "apps/analyze/hitrate.hpp"
#include "apps/bench/bench_gpu.hpp"
#include "apps/bench/bench_kv_codec.hpp"
#include "apps/bench/bench_serve.hpp"
#include "apps/bench/bench_store.hpp"
#include "apps/bench/bench_transfer.hpp"
#include "apps/bench/transfer_peer.hpp"
#include "apps/chaos/chaos_command.hpp"
#include "apps/experiment/experiment_command.hpp"
#include "apps/info_command.hpp"
#include "apps/node/node_command.hpp"
#include "apps/pool/pool_processes.hpp"
#include "apps/profile/profile_command.hpp"
#include "apps/run_command.hpp"
#include "apps/serve/serve_command.hpp"
#include "apps/sim/bench_admission.hpp"
#include "apps/sim/bench_conductor.hpp"
#include "apps/sim/bench_fidelity.hpp"
#include "apps/sim/bench_sim.hpp"
#include "apps/sim/replay_command.hpp"
#include "apps/up/bench_faults.hpp"
#include "apps/up/netns.hpp"
#include "apps/up/up_command.hpp"

#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  CLI::App app{"Crescent: a KVCache-centric, disaggregated LLM serving runtime"};
  app.require_subcommand(1);

  crescent::cli::run_options run;
  auto* run_cmd = app.add_subcommand(
      "run", "Bring up the embedded one-process cluster and replay the head of a trace");
  run_cmd->add_option("--config", run.config_path, "Cluster config (YAML); default: built in")
      ->check(CLI::ExistingFile);
  run_cmd->add_option("--trace", run.trace_path, "Mooncake trace (JSONL)")->capture_default_str();
  run_cmd->add_option("--requests", run.requests, "Requests to replay from the head of the trace")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  run_cmd->add_option("--speedup", run.speedup, "Replay arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  run_cmd->add_option("--output-scale", run.output_scale, "Multiply output lengths by this")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e3));
  run_cmd
      ->add_option("--kv-send", run.kv_send,
                   "KV to decode: config (prefill.stream_min_tokens), stream (layer by layer "
                   "while prefill runs), after (once prefill ends), ab (after and stream "
                   "alternating, twice each, and the ratio of their mean TTFTs), or pairs (one "
                   "run: each request and a twin of it, one sent after and one streamed)")
      ->capture_default_str()
      ->check(CLI::IsMember({"config", "stream", "after", "ab", "pairs"}));
  run_cmd->add_flag("--no-progress{false}", run.progress, "Do not print the progress line");
  run_cmd->add_flag("--verbose", run.verbose, "Log actor warnings");

  crescent::cli::up_options up;
  auto* up_cmd = app.add_subcommand(
      "up", "Bring up a cluster that spans processes from one file: start a `crescent node` for "
            "every node with an address, replay the head of a trace, carry out a fault plan, "
            "check the invariants, tear everything down (docs/faults.md)");
  up_cmd->add_option("cluster", up.cluster_path, "Cluster file (YAML)")
      ->required()
      ->check(CLI::ExistingFile);
  up_cmd
      ->add_option("--faults", up.faults_path,
                   "Fault plan (YAML): kill and pause node processes, fail and corrupt their "
                   "KV slices; with --netns also partition them and drop their packets")
      ->check(CLI::ExistingFile);
  up_cmd->add_option("--seed", up.seed, "Seed of the transfer faults' draws")
      ->capture_default_str();
  auto* netns_flag = up_cmd->add_flag(
      "--netns", up.netns, "Each node process in a network namespace of its own (root; nftables)");
  up_cmd
      ->add_option("--link-mbit", up.link_mbit,
                   "With --netns: each node process's link limited to this many Mbit/s each "
                   "way (tc's token bucket filter), as a node's NIC")
      ->check(CLI::Range(1u, crescent::up::link_mbit_max))
      ->needs(netns_flag);
  up_cmd->add_option("--run-dir", up.run_dir,
                     "Where the report, the fault log and each node's log go (new or empty; "
                     "default: crescent-up-<seconds since the epoch>)");
  up_cmd->add_option("--trace", up.run.trace_path, "Mooncake trace (JSONL)")->capture_default_str();
  up_cmd->add_option("--requests", up.run.requests, "Requests to replay from the head of the trace")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  up_cmd->add_option("--speedup", up.run.speedup, "Replay arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  up_cmd->add_option("--output-scale", up.run.output_scale, "Multiply output lengths by this")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e3));
  up_cmd
      ->add_option("--kv-send", up.run.kv_send,
                   "KV to decode: config (prefill.stream_min_tokens), stream, after, ab (after "
                   "and stream alternating, twice each, each a bring-up of its own, and the "
                   "ratio of their mean TTFTs), or pairs (one bring-up: each request and a twin "
                   "of it, one sent after and one streamed)")
      ->capture_default_str()
      ->check(CLI::IsMember({"config", "stream", "after", "ab", "pairs"}));
  up_cmd->add_flag("--no-progress{false}", up.run.progress, "Do not print the progress line");
  up_cmd->add_flag("--verbose", up.run.verbose, "Log actor warnings");

  crescent::chaos::chaos_options chaos;
  chaos.trace_path = crescent::cli::default_trace_path;
  auto* chaos_cmd = app.add_subcommand(
      "chaos", "Seeded fault campaigns in simulated time: per seed, a fault plan drawn from a "
               "budget, a replay on a small reference-engine cluster, and the invariants "
               "checked; a failing seed prints the command that runs it again (docs/faults.md)");
  chaos_cmd->add_option("--seeds", chaos.seeds, "How many seeds")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  chaos_cmd->add_option("--first", chaos.first, "The first seed")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 62));
  chaos_cmd->add_option("--requests", chaos.requests, "Requests from the head of the trace")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  chaos_cmd
      ->add_option("--faults", chaos.budget_path,
                   "Fault budget (YAML): kinds, rates, nodes lost at once; default: every kind, "
                   "up to 3 faults a seed, one node lost")
      ->check(CLI::ExistingFile);
  chaos_cmd
      ->add_option("--cluster", chaos.cluster_path,
                   "Cluster file (reference engine); default: the embedded 4-node cluster")
      ->check(CLI::ExistingFile);
  chaos_cmd->add_option("--trace", chaos.trace_path, "Mooncake trace (JSONL)")
      ->capture_default_str();
  chaos_cmd->add_option("--speedup", chaos.speedup, "Replay arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  chaos_cmd->add_option("--out", chaos.out_dir, "Where a failing seed's message trace goes")
      ->capture_default_str();
  chaos_cmd->add_option("--jobs", chaos.jobs, "Processes running seeds side by side")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  chaos_cmd->add_flag("--verbose", chaos.verbose, "A line per seed, with its plan");

  crescent::cli::serve_options serve;
  auto* serve_cmd = app.add_subcommand(
      "serve", "Bring up the cluster behind an OpenAI-compatible HTTP API: /v1/completions, "
               "/v1/chat/completions (streaming too), /v1/models, /metrics (docs/serve.md)");
  serve_cmd->add_option("--config", serve.config_path, "Cluster config (YAML); default: built in")
      ->check(CLI::ExistingFile);
  serve_cmd->add_option("--listen", serve.listen, "HOST:PORT to listen on (port 0: any free one)")
      ->capture_default_str();
  serve_cmd->add_option("--model", serve.door.model, "The model name clients ask for")
      ->capture_default_str();
  serve_cmd
      ->add_option("--max-tokens-default", serve.door.max_tokens_default,
                   "max_tokens of a body that has none")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  serve_cmd
      ->add_option("--body-bytes-max", serve.door.body_bytes_max,
                   "Bodies over this many bytes are answered 413")
      ->capture_default_str()
      ->check(CLI::Range(size_t{64}, size_t{1} << 30));
  serve_cmd
      ->add_option("--connections-max", serve.connections_max,
                   "HTTP connections served at once (a thread each); more wait to be accepted")
      ->capture_default_str()
      ->check(CLI::Range(1u, 16384u));
  serve_cmd->add_flag("--launch", serve.launch,
                      "Start a crescent node process for each node of --config with an address "
                      "(through its launcher, as crescent up does), and stop them at the end");
  serve_cmd->add_flag("--verbose", serve.verbose, "Log actor warnings");

  crescent::sim::replay_options replay;
  auto* replay_cmd = app.add_subcommand(
      "replay", "Replay a trace through the cluster's real actors in simulated time, as fast as "
                "the CPU allows, on the built-in paper cluster (16 x 8 A800 nodes, LLaMA3-70B, "
                "modeled) or a cluster file (docs/simulation.md)");
  replay_cmd->add_option("trace", replay.trace_path, "Mooncake trace (JSONL)");
  replay_cmd->add_flag("--sim", replay.sim, "Simulated time (required: the only mode of replay)");
  replay_cmd
      ->add_option("--cluster", replay.cluster_path,
                   "Cluster file (YAML, as crescent run --config); default: the built-in "
                   "paper cluster")
      ->check(CLI::ExistingFile);
  replay_cmd->add_option("--coupled", replay.coupled,
                         "The built-in baseline instead: a coupled (vLLM-style) instance on each "
                         "of the paper cluster's 16 nodes (docs/coupled.md): prefill-first, "
                         "chunked-prefill, prefix-caching or chunked-prefix-caching");
  replay_cmd->add_option("--requests", replay.requests, "Requests from the head (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1u << 24));
  replay_cmd->add_option("--speedup", replay.speedup, "Arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  replay_cmd->add_flag("--sequential", replay.sequential,
                       "One request at a time, the trace's timestamps ignored: each arrives 1 s "
                       "after the one before ended (as crescent analyze hitrate assumes)");
  replay_cmd->add_option("--seed", replay.seed, "Seed of access keys and random placement")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, UINT64_MAX));
  replay_cmd->add_option("--shuffle-seed", replay.shuffle_seed,
                         "Deliver ready messages in an order drawn from this seed instead of FIFO "
                         "(apps/sim/delivery_policy.hpp)");
  replay_cmd->add_option("--report", replay.report_path,
                         "Write the report and one record per request as JSON");
  replay_cmd->add_option("--plots", replay.plots_dir,
                         "Write TTFT and TBT CDFs and hit rate over time as PNGs (python3 with "
                         "matplotlib)");
  replay_cmd->add_option("--messages", replay.messages_path,
                         "Write every delivered message: time, sender, receiver, type, bytes "
                         "(apps/sim/message_log.hpp)");
  replay_cmd
      ->add_option("--faults", replay.faults_path,
                   "Fault plan (YAML, docs/faults.md): kill, pause, partition, drop, delay, "
                   "duplicate, reorder; --seed draws the messages its faults take")
      ->check(CLI::ExistingFile);
  replay_cmd->add_flag("--no-progress{false}", replay.progress, "No progress bar on stderr");
  replay_cmd->add_flag("--print-cluster", replay.print_cluster,
                       "Print the cluster (the built-in one, or --cluster's) as a cluster file, "
                       "every field, and exit");

  crescent::experiment::experiment_options experiment;
  auto* experiment_cmd = app.add_subcommand(
      "experiment", "Re-run one of the paper's figures (or all) in simulated time on the "
                    "built-in paper cluster: writes NAME.json, NAME.md and NAME.png into the out "
                    "dir (docs/experiments.md)");
  experiment_cmd->add_option("name", experiment.name, "An experiment below, or all")->required();
  experiment_cmd->add_option("--trace", experiment.trace_path, "Mooncake trace (JSONL)")
      ->capture_default_str();
  experiment_cmd->add_option("--out", experiment.out_dir, "Directory of the outputs")
      ->capture_default_str();
  experiment_cmd
      ->add_option("--seed", experiment.seed,
                   "Seed of access keys, random placement and the random policy (1 to 2^64 - 1)")
      ->capture_default_str();
  experiment_cmd->add_option("--requests", experiment.requests, "Requests from the head (0: all)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 1u << 24));
  experiment_cmd->add_flag("--no-progress{false}", experiment.progress,
                           "No progress lines on stderr");
  experiment_cmd->add_flag("--no-plots{false}", experiment.plots,
                           "Write no PNG (no python3 with matplotlib here)");
  experiment_cmd->footer(crescent::experiment::experiment_list());

  crescent::cli::profile_options profile;
  auto* profile_cmd = app.add_subcommand(
      "profile",
      "Measure the reference engine on this machine and write a profile the modeled "
      "engine reads (a fit of prefill and decode times; apps/profile/profile_command.hpp)");
  profile_cmd
      ->add_option("--config", profile.config_path,
                   "Cluster config whose model and limits to measure; default: built in")
      ->check(CLI::ExistingFile);
  profile_cmd->add_option("--out", profile.out_path, "The profile file to write")->required();
  profile_cmd->add_option("--name", profile.name, "The profile's name")->capture_default_str();
  profile_cmd->add_option("--repeats", profile.repeats, "Calls per point (the median counts)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 101u));
  profile_cmd->add_flag("--quick", profile.quick, "A smaller grid (for tests)");
  profile_cmd->add_flag("--no-warmup{false}", profile.warmup,
                        "Leave out the warm-up after idle (the `warmup:` section, "
                        "docs/simulation.md)");

  app.add_subcommand("info", "Show what this binary was built with");

  auto* analyze_cmd = app.add_subcommand("analyze", "Analyses of a trace that need no cluster");
  analyze_cmd->require_subcommand(1);
  crescent::cli::hitrate_options hitrate;
  auto* hitrate_cmd = analyze_cmd->add_subcommand(
      "hitrate",
      "Prefix hit rate of one global LRU cache, requests in file order, time ignored (the "
      "paper's Fig. 9 method; a check for the replay): a request reuses the longest cached "
      "prefix of its chained block keys, min(k x B, input_length) tokens, then all its blocks "
      "are inserted or refreshed; hit rate = reused / prompt tokens. One row per capacity");
  hitrate_cmd->add_option("trace", hitrate.trace_path, "Mooncake trace (JSONL)")->required();
  const CLI::Validator capacity_word(
      [](std::string& word) -> std::string {
        if (crescent::analyze::parse_capacity_tokens(word))
          return {};
        return "expected a non-negative integer or unbounded, got " + word;
      },
      "TOKENS|unbounded");
  hitrate_cmd
      ->add_option("--capacity-tokens", hitrate.capacities,
                   "Cache capacities, one row each: tokens (the cache holds floor(C / B) blocks) "
                   "or unbounded (0: the same)")
      ->required()
      ->check(capacity_word);
  hitrate_cmd
      ->add_option("--block-tokens", hitrate.block_tokens,
                   "Tokens per cache block B, a divisor of 512: trace block i becomes 512 / B "
                   "cache blocks, sub-block j keyed H(previous key, hash_id_i, j); a partial last "
                   "block becomes ceil(rest / B) of them")
      ->capture_default_str();
  hitrate_cmd->add_flag("--json", hitrate.json, "Print one JSON object instead of the table");

  auto* bench_cmd = app.add_subcommand("bench", "Benchmarks, each against a baseline measured in "
                                                "the same run");
  bench_cmd->require_subcommand(1);
  crescent::bench::bench_transfer_options transfer;
  auto* transfer_cmd = bench_cmd->add_subcommand(
      "transfer",
      "Transfer engine between two processes (shm, tcp, cuda) vs memcpy, a TCP stream and "
      "cudaMemcpy");
  transfer_cmd->add_option("--trials", transfer.trials, "Trials per case (rows report medians)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  transfer_cmd->add_option("--seconds", transfer.seconds_per_case, "Seconds per trial")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 60.0));
  transfer_cmd
      ->add_option("--warmup-seconds", transfer.warmup_seconds,
                   "Untimed turns of baseline and engine before each path's first row")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 60.0));
  transfer_cmd->add_option("--region-mib", transfer.region_mib, "Size of the peer's region")
      ->capture_default_str()
      ->check(CLI::Range(64, 16384));
  transfer_cmd->add_flag("--quick", transfer.quick, "One batch size and one thread only");
  transfer_cmd->add_option("--only", transfer.only, "One path only")
      ->check(CLI::IsMember({"shm", "tcp", "cuda"}));
  transfer_cmd->add_option("--op", transfer.op, "Rows of this operation only")
      ->check(CLI::IsMember({"read", "write"}));
  transfer_cmd->add_option("--block-kib", transfer.blocks_kib, "Rows of these block sizes only")
      ->check(CLI::IsMember({64, 1024, 4096}));
  transfer_cmd->add_option("--batch", transfer.batches, "Rows of these batch sizes only")
      ->check(CLI::IsMember({16, 128}));
  transfer_cmd->add_option("--threads", transfer.threads, "Rows of these thread counts only")
      ->check(CLI::IsMember({1, 2}));
  transfer_cmd->add_option("--slice-kib", transfer.slice_kib, "The engine's slice size")
      ->capture_default_str()
      ->check(CLI::Range(4, 16384));
  transfer_cmd
      ->add_option("--tcp-connections", transfer.tcp_connections,
                   "TCP connections per peer (0: one per two CPUs this process may use, 1 to 4)")
      ->capture_default_str()
      ->check(CLI::Range(0, 64));
  transfer_cmd
      ->add_option("--cpus", transfer.cpus,
                   "Where the two processes run: auto (the cores this process may use split in two "
                   "halves, as iperf3 -A pins its ends), none (where the kernel puts them) or "
                   "CLIENT:PEER, two lists of CPUs without one in common, each of items N or N-M "
                   "separated by commas (0:1, 0-3:4-7)")
      ->capture_default_str();
  transfer_cmd
      ->add_option("--tcp-slice-kib", transfer.tcp_slice_kib,
                   "The engine's slice size on the TCP path")
      ->capture_default_str()
      ->check(CLI::Range(4, 16384));

  crescent::cli::bench_faults_options faults_bench;
  auto* faults_cmd = bench_cmd->add_subcommand(
      "faults", "Real-mode faults (kill, SIGSTOP, partition, 5% packet loss) on 4 node processes "
                "in network namespaces, each run's p99 TTFT against one with no faults (root)");
  faults_cmd->add_option("--trace", faults_bench.trace_path, "The trace")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  faults_cmd->add_option("--requests", faults_bench.requests, "Requests a run")
      ->capture_default_str()
      ->check(CLI::Range(size_t{1}, size_t{100000}));
  faults_cmd->add_option("--speedup", faults_bench.speedup, "Arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  faults_cmd->add_option("--out", faults_bench.out_dir, "Where the runs' directories go");

  crescent::sim::bench_sim_options bench_sim;
  auto* sim_cmd = bench_cmd->add_subcommand(
      "sim", "Simulated time on the paper cluster vs real time: the synthetic trace twice "
             "(speed, determinism) and an hour-long tiled trace (apps/sim/bench_sim.hpp)");
  sim_cmd->add_option("--trace", bench_sim.trace_path, "The trace (and the tiles' source)")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  sim_cmd->add_option("--hour-copies", bench_sim.hour_copies, "Copies tiled into the hour")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));

  std::string agreement_trace = "data/synthetic_trace.jsonl";
  auto* agreement_cmd = bench_cmd->add_subcommand(
      "agreement", "The replay's hit rate on one pool node, one request at a time, against "
                   "crescent analyze hitrate and the reference table, at 4 capacities");
  agreement_cmd->add_option("--trace", agreement_trace, "The trace")
      ->capture_default_str()
      ->check(CLI::ExistingFile);

  crescent::sim::bench_fidelity_options fidelity;
  auto* fidelity_cmd = bench_cmd->add_subcommand(
      "fidelity", "A simulated run against a real one: the head of a trace on the embedded "
                  "cluster for real, then in simulated time with a profile of the reference "
                  "engine (apps/sim/bench_fidelity.hpp)");
  fidelity_cmd->add_option("--trace", fidelity.trace_path, "The trace")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  fidelity_cmd->add_option("--requests", fidelity.requests, "Requests from its head")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100000u));
  fidelity_cmd->add_option("--speedup", fidelity.speedup, "Arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  fidelity_cmd
      ->add_option("--config", fidelity.config_path,
                   "The cluster of both runs (a reference engine); default: built in")
      ->check(CLI::ExistingFile);
  fidelity_cmd->add_option("--profile", fidelity.profile_path,
                           "The reference engine's profile (crescent profile --out); default: "
                           "measured first");
  fidelity_cmd->add_flag("--no-warmup{false}", fidelity.warmup,
                         "The profile measured first leaves out the warm-up after idle");

  crescent::sim::bench_conductor_options conductor_bench;
  auto* conductor_cmd = bench_cmd->add_subcommand(
      "conductor", "Conductor decisions per second and their latency, the policy alone and "
                   "through the actor, at 64 + 64 instances and 1M indexed blocks "
                   "(apps/sim/bench_conductor.hpp)");
  conductor_cmd->add_option("--trace", conductor_bench.trace_path, "The prompts' trace")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  conductor_cmd
      ->add_option("--instances", conductor_bench.instances,
                   "Prefill instances, and as many decode ones, one per node")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
  conductor_cmd->add_option("--blocks", conductor_bench.indexed_blocks, "Blocks indexed")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 22));
  conductor_cmd->add_option("--decisions", conductor_bench.decisions, "Decisions per policy")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100'000'000u));
  conductor_cmd
      ->add_option("--actor-requests", conductor_bench.actor_requests,
                   "Requests through the actor, per phase")
      ->capture_default_str()
      ->check(CLI::Range(1u, 10'000'000u));

  crescent::sim::bench_admission_options admission_bench;
  auto* admission_cmd = bench_cmd->add_subcommand(
      "admission", "Early rejection at twice the load the cluster sustains: admission none, "
                   "current_load and predicted_load in simulated time "
                   "(apps/sim/bench_admission.hpp)");
  admission_cmd->add_option("--trace", admission_bench.trace_path, "The trace")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  admission_cmd
      ->add_option("--cluster", admission_bench.cluster_path,
                   "Cluster file; default: the built-in paper cluster")
      ->check(CLI::ExistingFile);
  admission_cmd
      ->add_option("--tbt-slo-ms", admission_bench.tbt_slo_ms,
                   "The TBT SLO; default: the cluster's")
      ->check(CLI::Range(1u, 1'000'000u));
  admission_cmd
      ->add_option("--sustained", admission_bench.sustained_speedup,
                   "The speedup the cluster sustains, instead of searching for it")
      ->check(CLI::Range(1e-3, 1e3));

  crescent::bench::bench_store_options store;
  auto* store_cmd = bench_cmd->add_subcommand(
      "store", "KV pool (master and nodes on loopback) vs memcached and redis-server");
  store_cmd->add_option("--clients", store.clients, "Concurrent clients")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  store_cmd->add_option("--sizes-kib", store.sizes_kib, "Value sizes")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  store_cmd->add_option("--mib-per-phase", store.mib_per_phase, "Bytes moved per put/get phase")
      ->capture_default_str()
      ->check(CLI::Range(1, 16384));
  store_cmd->add_option("--get-rounds", store.get_rounds, "Times a get phase reads every value")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  store_cmd->add_option("--trials", store.trials, "Trials (rows report medians)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  store_cmd->add_option("--nodes", store.nodes, "Pool node processes")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  store_cmd->add_option("--replicas", store.replicas, "Replicas per block")
      ->capture_default_str()
      ->check(CLI::Range(1, 8));
  store_cmd->add_flag("--tcp", store.tcp, "Pool bytes over TCP instead of shared memory");
  store_cmd->add_flag("--no-sync{false}", store.sync_commits, "The master does not fsync commits");
  store_cmd->add_flag("--no-combine{false}", store.combine_gets,
                      "Each pool client sends its gets to the master alone");
  store_cmd->add_option("--only", store.only, "The pool alone, no baselines")
      ->check(CLI::IsMember({"crescent"}));

  crescent::bench::bench_kv_codec_options kv_codec;
  auto* kv_codec_cmd = bench_cmd->add_subcommand(
      "kv-codec", "KV codecs (int8, kivi2/4, kvquant3/4) vs full-precision KV on the reference "
                  "engine in the same run: token agreement, KL, attention error, size vs fp16, "
                  "encode/decode GB/s vs memcpy (apps/bench/bench_kv_codec.hpp)");
  kv_codec_cmd->add_option("--prompts", kv_codec.prompts, "Prompts of the quality runs")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  kv_codec_cmd->add_option("--prompt-tokens-min", kv_codec.prompt_tokens_min, "Shortest prompt")
      ->capture_default_str()
      ->check(CLI::Range(2u, 65536u));
  kv_codec_cmd->add_option("--prompt-tokens-max", kv_codec.prompt_tokens_max, "Longest prompt")
      ->capture_default_str()
      ->check(CLI::Range(2u, 65536u));
  kv_codec_cmd->add_option("--decode-tokens", kv_codec.decode_tokens, "Tokens decoded per prompt")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));
  kv_codec_cmd
      ->add_option("--calibration-prompts", kv_codec.calibration_prompts,
                   "Prompts of KVQuant's calibration run")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  kv_codec_cmd->add_option("--layers", kv_codec.layers, "Model layers")->capture_default_str();
  kv_codec_cmd->add_option("--d-model", kv_codec.d_model, "Model width")->capture_default_str();
  kv_codec_cmd->add_option("--heads", kv_codec.heads, "Query heads")->capture_default_str();
  kv_codec_cmd->add_option("--kv-heads", kv_codec.kv_heads, "KV heads")->capture_default_str();
  kv_codec_cmd->add_option("--block-tokens", kv_codec.block_tokens, "Tokens per KV block")
      ->capture_default_str();
  kv_codec_cmd->add_option("--group-tokens", kv_codec.group_tokens, "KIVI's group")
      ->capture_default_str();
  kv_codec_cmd->add_option("--sink-tokens", kv_codec.sink_tokens, "KVQuant's float32 sinks")
      ->capture_default_str();
  kv_codec_cmd->add_option("--seed", kv_codec.seed, "Weights and prompts")->capture_default_str();
  kv_codec_cmd
      ->add_option("--speed-seconds", kv_codec.speed_seconds,
                   "Timing per codec and direction (medians of rounds)")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 60.0));

  crescent::bench::bench_gpu_options gpu_bench;
  auto* gpu_cmd = bench_cmd->add_subcommand(
      "gpu", "The device engine (CUDA) vs the CPU reference engine in the same run: prefill and "
             "decode tokens/s, tokens and KV bytes equal; KV page gather/scatter GB/s vs a copy "
             "within the device (apps/bench/bench_gpu.hpp)");
  gpu_cmd->add_option("--device", gpu_bench.device, "CUDA device index")
      ->capture_default_str()
      ->check(CLI::Range(0, 63));
  gpu_cmd->add_flag("--host-emulation", gpu_bench.host_emulation,
                    "The device engine's kernels emulated on the CPU (no GPU needed; slow)");
  gpu_cmd->add_option("--prompts", gpu_bench.prompts, "Prompts, decoded together")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  gpu_cmd->add_option("--prompt-tokens", gpu_bench.prompt_tokens, "Tokens of each prompt")
      ->capture_default_str()
      ->check(CLI::Range(1u, 131072u));
  gpu_cmd->add_option("--chunk-tokens", gpu_bench.chunk_tokens, "Tokens of a prefill call")
      ->capture_default_str()
      ->check(CLI::Range(1u, 131072u));
  gpu_cmd->add_option("--decode-steps", gpu_bench.decode_steps, "Decode steps of the batch")
      ->capture_default_str()
      ->check(CLI::Range(0u, 4096u));
  gpu_cmd->add_option("--pages", gpu_bench.pages, "Pages gathered and scattered")
      ->capture_default_str()
      ->check(CLI::Range(1u, 65535u));
  gpu_cmd->add_option("--rounds", gpu_bench.rounds, "Timed rounds of the page rows")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1000u));
  gpu_cmd->add_option("--layers", gpu_bench.layers, "Model layers")->capture_default_str();
  gpu_cmd->add_option("--d-model", gpu_bench.d_model, "Model width")->capture_default_str();
  gpu_cmd->add_option("--heads", gpu_bench.heads, "Query heads")->capture_default_str();
  gpu_cmd->add_option("--kv-heads", gpu_bench.kv_heads, "KV heads")->capture_default_str();
  gpu_cmd->add_option("--ffn", gpu_bench.ffn, "SwiGLU width")->capture_default_str();
  gpu_cmd->add_option("--vocab", gpu_bench.vocab, "Vocabulary")->capture_default_str();
  gpu_cmd->add_option("--block-tokens", gpu_bench.block_tokens, "Tokens per KV page")
      ->capture_default_str();
  gpu_cmd->add_option("--seed", gpu_bench.seed, "Weights and prompts")->capture_default_str();

  crescent::bench::bench_serve_options serve_bench;
  auto* serve_bench_cmd = bench_cmd->add_subcommand(
      "serve", "crescent serve's HTTP front door: a trace replayed over HTTP against the same "
               "requests in process (TTFT ratio), N streaming clients held open (server RSS), "
               "overload (429 latency, admitted TTFT) (apps/bench/bench_serve.hpp)");
  serve_bench_cmd->add_option("--trace", serve_bench.trace_path, "Mooncake trace (JSONL)")
      ->capture_default_str();
  serve_bench_cmd
      ->add_option("--config", serve_bench.config_path, "Cluster config (YAML); default: built in")
      ->check(CLI::ExistingFile);
  serve_bench_cmd
      ->add_option("--requests", serve_bench.requests, "Requests replayed from the trace's head")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  serve_bench_cmd->add_option("--speedup", serve_bench.speedup, "The replay's arrivals x faster")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  serve_bench_cmd
      ->add_option("--output-scale", serve_bench.output_scale, "Multiply output lengths by this")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e3));
  serve_bench_cmd->add_option("--clients", serve_bench.clients, "Streaming clients held open")
      ->capture_default_str()
      ->check(CLI::Range(1u, 100'000u));
  serve_bench_cmd
      ->add_option("--clients-config", serve_bench.clients_config_path,
                   "Cluster config of the clients phase (default: built in, admission none)")
      ->check(CLI::ExistingFile);
  serve_bench_cmd
      ->add_option("--client-tokens", serve_bench.client_tokens, "max_tokens of each held client")
      ->capture_default_str()
      ->check(CLI::Range(1u, 8000u));
  serve_bench_cmd
      ->add_option("--hold-s", serve_bench.hold_s,
                   "Seconds the clients stay held once each has its first token")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3600.0));
  serve_bench_cmd
      ->add_option("--overload", serve_bench.overload,
                   "The overload phase's rate over the replay's")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e3));
  serve_bench_cmd
      ->add_option("--overload-requests", serve_bench.overload_requests,
                   "Requests of the overload phase (default: 3 x --requests)")
      ->check(CLI::Range(1u, 1u << 20));
  serve_bench_cmd->add_option("--only", serve_bench.only, "One phase alone")
      ->check(CLI::IsMember({"replay", "clients", "overload"}));

  crescent::bench::transfer_peer_options peer;
  auto* peer_cmd = app.add_subcommand(
      "transfer-peer", "Helper process of the transfer benchmark and tests: serves one region");
  peer_cmd->add_option("--node", peer.node, "Node id of this process")->capture_default_str();
  peer_cmd->add_option("--region-mib", peer.region_mib, "Size of the served region")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  peer_cmd->add_flag("--no-shm{false}", peer.shm, "Do not share the region table");
  peer_cmd->add_flag("--no-tcp{false}", peer.tcp, "Run no TCP data-plane server");
  peer_cmd->add_option("--gpu-mib", peer.gpu_mib, "Also serve a region of GPU memory (cuda:0)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65536));
  peer_cmd->add_option("--cpus", peer.cpus, "Run on these CPUs only (0-3,8)");

  crescent::pool::master_process_options pool_master;
  auto* master_cmd = app.add_subcommand(
      "pool-master", "Run the KV pool's store master as its own process (published on a port)");
  master_cmd->add_option("--nodes", pool_master.nodes, "Node slots")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  master_cmd->add_option("--db", pool_master.db_path, "RocksDB directory")->required();
  master_cmd->add_option("--port", pool_master.port, "Port (0: any)")->capture_default_str();
  master_cmd->add_flag("--no-sync{false}", pool_master.sync_commits, "Do not fsync commits");
  master_cmd->add_option("--put-timeout-ms", pool_master.put_timeout_ms)->capture_default_str();
  master_cmd->add_option("--lease-ttl-ms", pool_master.lease_ttl_ms)->capture_default_str();
  master_cmd->add_option("--node-timeout-ms", pool_master.node_timeout_ms)->capture_default_str();
  master_cmd
      ->add_option("--ssd-grace-ms", pool_master.ssd_grace_ms,
                   "How long a lost node's SSD blocks wait for it to come back (0: not at all)")
      ->capture_default_str();

  crescent::pool::node_process_options pool_node;
  auto* node_cmd = app.add_subcommand(
      "pool-node", "Run one node's block owner as its own process, joined to a pool master");
  node_cmd->add_option("--node", pool_node.node, "Node id")->required();
  node_cmd->add_option("--master-host", pool_node.master_host)->capture_default_str();
  node_cmd->add_option("--master-port", pool_node.master_port)->required();
  node_cmd->add_option("--dram-mib", pool_node.dram_mib)
      ->capture_default_str()
      ->check(CLI::Range(1, 1 << 20));
  node_cmd->add_option("--ssd-mib", pool_node.ssd_mib)->capture_default_str();
  node_cmd->add_option("--ssd-dir", pool_node.ssd_dir);
  node_cmd->add_flag("--no-shm{false}", pool_node.shm, "Do not share memory with local peers");
  node_cmd
      ->add_option("--file-size-limit", pool_node.file_size_limit_bytes,
                   "Bytes no file of this process may grow past (RLIMIT_FSIZE; writes beyond "
                   "fail like a full disk): to break a node on purpose")
      ->check(CLI::Range(uint64_t{1} << 20, uint64_t{1} << 50));

  crescent::cli::node_options node;
  auto* host_cmd = app.add_subcommand(
      "node", "Host one node of a cluster that spans processes (its block owner, decode "
              "instances and node agent); the cluster's `crescent run` joins it");
  host_cmd->add_option("--config", node.config_path, "Cluster config (YAML), as the main process's")
      ->required()
      ->check(CLI::ExistingFile);
  host_cmd->add_option("--node", node.node, "Which node of the config this process hosts")
      ->required();
  host_cmd
      ->add_option("--port", node.port,
                   "Port of its node agent (0: any; default: the port of "
                   "the node's address)")
      ->check(CLI::Range(0, 65535));
  host_cmd->add_option("--ssd-dir", node.ssd_dir,
                       "Directory of its SSD tier (default: store.ssd_dir/node-<n>)");
  host_cmd->add_option("--transfer-faults", node.transfer_faults,
                       "KV slice faults that crescent up switches on and off with signals: "
                       "KIND:PROBABILITY:NODE,... (KIND fail_transfer or corrupt, NODE the "
                       "slice's remote end or 'any')");
  host_cmd->add_option("--fault-seed", node.fault_seed, "Seed of the transfer faults' draws")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("node"))
    return crescent::cli::node_command(node);
  if (app.got_subcommand("pool-master"))
    return crescent::pool::run_master_process(pool_master);
  if (app.got_subcommand("pool-node"))
    return crescent::pool::run_node_process(pool_node);
  if (app.got_subcommand("run"))
    return crescent::cli::run_command(run);
  if (app.got_subcommand("serve"))
    return crescent::cli::serve_command(serve);
  if (app.got_subcommand("up"))
    return crescent::cli::up_command(up);
  if (app.got_subcommand("chaos"))
    return crescent::chaos::chaos_command(chaos);
  if (app.got_subcommand("profile"))
    return crescent::cli::profile_command(profile);
  if (app.got_subcommand("experiment"))
    return crescent::experiment::experiment_command(experiment);
  if (app.got_subcommand("replay"))
    return crescent::sim::replay_command(replay);
  if (analyze_cmd->got_subcommand("hitrate"))
    return crescent::cli::hitrate_command(hitrate);
  if (app.got_subcommand("transfer-peer"))
    return crescent::bench::run_transfer_peer(peer);
  if (bench_cmd->got_subcommand("agreement"))
    return crescent::sim::bench_agreement(agreement_trace);
  if (bench_cmd->got_subcommand("fidelity"))
    return crescent::sim::bench_fidelity(fidelity);
  if (bench_cmd->got_subcommand("admission"))
    return crescent::sim::bench_admission(admission_bench);
  if (bench_cmd->got_subcommand("conductor"))
    return crescent::sim::bench_conductor(conductor_bench);
  if (bench_cmd->got_subcommand("sim"))
    return crescent::sim::bench_sim(bench_sim);
  if (bench_cmd->got_subcommand("faults"))
    return crescent::cli::bench_faults(faults_bench);
  if (bench_cmd->got_subcommand("store"))
    return crescent::bench::bench_store(store);
  if (bench_cmd->got_subcommand("serve"))
    return crescent::bench::bench_serve(serve_bench);
  if (bench_cmd->got_subcommand("kv-codec"))
    return crescent::bench::bench_kv_codec(kv_codec);
  if (bench_cmd->got_subcommand("gpu"))
    return crescent::bench::bench_gpu(gpu_bench);
  if (bench_cmd->got_subcommand("transfer"))
    return crescent::bench::bench_transfer(transfer);
  return crescent::cli::info_command();
}
