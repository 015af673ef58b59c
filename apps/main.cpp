// The `crescent` command line.
#include "apps/info_command.hpp"
#include "apps/run_command.hpp"

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
  run_cmd->add_flag("--no-progress{false}", run.progress, "Do not print the progress line");
  run_cmd->add_flag("--verbose", run.verbose, "Log actor warnings");

  app.add_subcommand("info", "Show what this binary was built with");

  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("run"))
    return crescent::cli::run_command(run);
  return crescent::cli::info_command();
}
