// The commands of simulated time, and of what needs no cluster (apps/cli/commands.hpp).
#include "apps/analyze/analyze_command.hpp"
#include "apps/analyze/hitrate.hpp"
#include "apps/chaos/chaos_command.hpp"
#include "apps/cli/commands.hpp"
#include "apps/experiment/experiment_command.hpp"
#include "apps/profile/profile_command.hpp"
#include "apps/run_command.hpp"
#include "apps/sim/replay_command.hpp"

#include <string>

namespace crescent::cli {

void add_chaos(CLI::App& app, commands& out) {
  auto [chaos_cmd, chaos] = add_command<chaos::chaos_options>(
      app, out, chaos::chaos_command, "chaos",
      "Seeded fault campaigns in simulated time: per seed, a fault plan drawn from a "
      "budget, a replay on a small reference-engine cluster, and the invariants "
      "checked; a failing seed prints the command that runs it again (docs/faults.md)");
  chaos.trace_path = default_trace_path;
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
  auto* verbose = chaos_cmd->add_flag("--verbose", chaos.verbose, "A line per seed, with its plan");
  chaos_cmd
      ->add_flag("--faults-log", chaos.faults_log,
                 "With --verbose: each seed's fault log, every message and KV slice a fault took, "
                 "with its time")
      ->needs(verbose);
}

void add_replay(CLI::App& app, commands& out) {
  auto [replay_cmd, replay] = add_command<sim::replay_options>(
      app, out, sim::replay_command, "replay",
      "Replay a trace through the cluster's real actors in simulated time, as fast as "
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
}

void add_experiment(CLI::App& app, commands& out) {
  auto [experiment_cmd, experiment] = add_command<experiment::experiment_options>(
      app, out, experiment::experiment_command, "experiment",
      "Re-run one of the paper's figures (or all) in simulated time on the "
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
  experiment_cmd->footer(experiment::experiment_list());
}

void add_profile(CLI::App& app, commands& out) {
  auto [profile_cmd, profile] = add_command<profile_options>(
      app, out, profile_command, "profile",
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
}

void add_analyze(CLI::App& app, commands& out) {
  auto* analyze_cmd = app.add_subcommand("analyze", "Analyses of a trace that need no cluster");
  analyze_cmd->require_subcommand(1);
  auto [hitrate_cmd, hitrate] = add_command<hitrate_options>(
      *analyze_cmd, out, hitrate_command, "hitrate",
      "Prefix hit rate of one global LRU cache, requests in file order, time ignored (the "
      "paper's Fig. 9 method; a check for the replay): a request reuses the longest cached "
      "prefix of its chained block keys, min(k x B, input_length) tokens, then all its blocks "
      "are inserted or refreshed; hit rate = reused / prompt tokens. One row per capacity");
  hitrate_cmd->add_option("trace", hitrate.trace_path, "Mooncake trace (JSONL)")->required();
  const CLI::Validator capacity_word(
      [](std::string& word) -> std::string {
        if (analyze::parse_capacity_tokens(word))
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
}

} // namespace crescent::cli
