// The `crescent` command line, one function per command: each adds its subcommand to `app`, with
// its options bound to an options struct that the command owns, and appends the command (its
// subcommand and what runs it) to `out` (add_command). main parses once and runs the one command
// chosen.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace crescent::cli {

struct command {
  CLI::App* app = nullptr;  // the subcommand (a leaf: `bench store`, not `bench`)
  std::function<int()> run; // runs it with the options as parsed; returns the exit status
};

using commands = std::vector<command>;

/// Adds the subcommand `name` to `parent`, with options of its own that `run` is called with
/// when it is the one chosen (appended to `out`). Returns the subcommand, to add the options to,
/// and the options, which live as long as the command line (CLI11 binds options by address).
template <class Options, class Run>
std::pair<CLI::App*, Options&> add_command(CLI::App& parent, commands& out, Run run,
                                           std::string name, std::string description) {
  auto options = std::make_shared<Options>();
  auto* cmd = parent.add_subcommand(std::move(name), std::move(description));
  out.push_back({cmd, [options, run] { return run(*options); }});
  return {cmd, *options};
}

// In the order `crescent --help` lists them.
// apps/cli/cluster_commands.cpp: clusters in real time, and the processes they start.
void add_run(CLI::App& app, commands& out);
void add_up(CLI::App& app, commands& out);
void add_serve(CLI::App& app, commands& out);
void add_info(CLI::App& app, commands& out);
void add_transfer_peer(CLI::App& app, commands& out);
void add_pool_master(CLI::App& app, commands& out);
void add_pool_node(CLI::App& app, commands& out);
void add_node(CLI::App& app, commands& out);
// apps/cli/sim_commands.cpp: simulated time, and what needs no cluster.
void add_chaos(CLI::App& app, commands& out);
void add_replay(CLI::App& app, commands& out);
void add_experiment(CLI::App& app, commands& out);
void add_profile(CLI::App& app, commands& out);
void add_analyze(CLI::App& app, commands& out);
// apps/cli/bench_commands.cpp: `crescent bench ...`.
void add_bench(CLI::App& app, commands& out);

} // namespace crescent::cli
