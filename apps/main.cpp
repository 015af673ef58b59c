// The `crescent` command line.
#include "apps/bench/bench_transfer.hpp"
#include "apps/bench/transfer_peer.hpp"
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

  auto* bench_cmd = app.add_subcommand("bench", "Benchmarks, each against a baseline measured in "
                                                "the same run");
  bench_cmd->require_subcommand(1);
  crescent::bench::bench_transfer_options transfer;
  auto* transfer_cmd = bench_cmd->add_subcommand(
      "transfer", "Transfer engine between two processes (shm, tcp) vs memcpy and a TCP stream");
  transfer_cmd->add_option("--trials", transfer.trials, "Trials per case (rows report medians)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  transfer_cmd->add_option("--seconds", transfer.seconds_per_case, "Seconds per trial")
      ->capture_default_str()
      ->check(CLI::Range(0.01, 60.0));
  transfer_cmd->add_option("--region-mib", transfer.region_mib, "Size of the peer's region")
      ->capture_default_str()
      ->check(CLI::Range(64, 16384));
  transfer_cmd->add_flag("--quick", transfer.quick, "One batch size and one thread only");
  transfer_cmd->add_option("--only", transfer.only, "One path only")
      ->check(CLI::IsMember({"shm", "tcp"}));
  transfer_cmd->add_option("--slice-kib", transfer.slice_kib, "The engine's slice size")
      ->capture_default_str()
      ->check(CLI::Range(4, 16384));
  transfer_cmd
      ->add_option("--tcp-connections", transfer.tcp_connections, "TCP connections per peer")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  transfer_cmd
      ->add_option("--tcp-slice-kib", transfer.tcp_slice_kib,
                   "The engine's slice size on the TCP path")
      ->capture_default_str()
      ->check(CLI::Range(4, 16384));

  crescent::bench::transfer_peer_options peer;
  auto* peer_cmd = app.add_subcommand(
      "transfer-peer", "Helper process of the transfer benchmark and tests: serves one region");
  peer_cmd->add_option("--node", peer.node, "Node id of this process")->capture_default_str();
  peer_cmd->add_option("--region-mib", peer.region_mib, "Size of the served region")
      ->capture_default_str()
      ->check(CLI::Range(1, 65536));
  peer_cmd->add_flag("--no-shm{false}", peer.shm, "Do not share the region table");
  peer_cmd->add_flag("--no-tcp{false}", peer.tcp, "Run no TCP data-plane server");

  CLI11_PARSE(app, argc, argv);
  if (app.got_subcommand("run"))
    return crescent::cli::run_command(run);
  if (app.got_subcommand("transfer-peer"))
    return crescent::bench::run_transfer_peer(peer);
  if (bench_cmd->got_subcommand("transfer"))
    return crescent::bench::bench_transfer(transfer);
  return crescent::cli::info_command();
}
