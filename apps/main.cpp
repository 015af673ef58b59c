// The `crescent` command line: the commands are in apps/cli/ (commands.hpp).
#include "apps/cli/commands.hpp"

#include <CLI/CLI.hpp>

int main(int argc, char** argv) {
  namespace cli = crescent::cli;
  CLI::App app{"Crescent: a KVCache-centric, disaggregated LLM serving runtime"};
  app.require_subcommand(1);
  cli::commands commands;
  for (auto add :
       {&cli::add_run, &cli::add_up, &cli::add_chaos, &cli::add_serve, &cli::add_replay,
        &cli::add_experiment, &cli::add_profile, &cli::add_info, &cli::add_analyze, &cli::add_bench,
        &cli::add_transfer_peer, &cli::add_pool_master, &cli::add_pool_node, &cli::add_node})
    add(app, commands);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version end here with 0; a bad flag is a run that could not start: 2, as
    // README says (CLI11's own codes, 105 to 114, name nothing a script can rely on).
    return app.exit(e) == 0 ? 0 : 2;
  }
  for (const auto& c : commands)
    if (c.app->parsed())
      return c.run();
  return 2; // not reached: app requires a subcommand, and each group one of its own
}
