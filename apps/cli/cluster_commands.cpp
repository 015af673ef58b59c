// The commands of clusters in real time, and of the processes they start (apps/cli/commands.hpp).
#include "apps/bench/transfer_peer.hpp"
#include "apps/cli/commands.hpp"
#include "apps/info_command.hpp"
#include "apps/node/node_command.hpp"
#include "apps/pool/pool_processes.hpp"
#include "apps/run_command.hpp"
#include "apps/serve/serve_command.hpp"
#include "apps/up/netns.hpp"
#include "apps/up/up_command.hpp"

namespace crescent::cli {

namespace {

// The replay's options, as `crescent run` and `crescent up` share them; `kv_send_help` says what
// an A/B of --kv-send runs there.
void add_replay_options(CLI::App* cmd, run_options& run, const char* kv_send_help) {
  cmd->add_option("--trace", run.trace_path, "Mooncake trace (JSONL)")->capture_default_str();
  cmd->add_option("--requests", run.requests, "Requests to replay from the head of the trace")
      ->capture_default_str()
      ->check(CLI::Range(1u, 1u << 20));
  cmd->add_option("--speedup", run.speedup, "Replay arrivals this many times faster")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e6));
  cmd->add_option("--output-scale", run.output_scale, "Multiply output lengths by this")
      ->capture_default_str()
      ->check(CLI::Range(1e-3, 1e3));
  cmd->add_option("--kv-send", run.kv_send, kv_send_help)
      ->capture_default_str()
      ->check(CLI::IsMember({"config", "stream", "after", "ab", "pairs"}));
  cmd->add_flag("--no-progress{false}", run.progress, "Do not print the progress line");
  cmd->add_flag("--verbose", run.verbose, "Log actor warnings");
}

} // namespace

void add_run(CLI::App& app, commands& out) {
  auto [run_cmd, run] = add_command<run_options>(
      app, out, run_command, "run",
      "Bring up the embedded one-process cluster and replay the head of a trace");
  run_cmd->add_option("--config", run.config_path, "Cluster config (YAML); default: built in")
      ->check(CLI::ExistingFile);
  add_replay_options(run_cmd, run,
                     "KV to decode: config (prefill.stream_min_tokens), stream (layer by layer "
                     "while prefill runs), after (once prefill ends), ab (after and stream "
                     "alternating, twice each, and the ratio of their mean TTFTs), or pairs (one "
                     "run: each request and a twin of it, one sent after and one streamed)");
}

void add_up(CLI::App& app, commands& out) {
  auto [up_cmd, up] = add_command<up_options>(
      app, out, [](const up_options& o) { return up_command(o); }, "up",
      "Bring up a cluster that spans processes from one file: start a `crescent node` for "
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
      ->check(CLI::Range(1u, up::link_mbit_max))
      ->needs(netns_flag);
  up_cmd->add_option("--run-dir", up.run_dir,
                     "Where the report, the fault log and each node's log go (new or empty; "
                     "default: crescent-up-<seconds since the epoch>)");
  add_replay_options(up_cmd, up.run,
                     "KV to decode: config (prefill.stream_min_tokens), stream, after, ab (after "
                     "and stream alternating, twice each, each a bring-up of its own, and the "
                     "ratio of their mean TTFTs), or pairs (one bring-up: each request and a twin "
                     "of it, one sent after and one streamed)");
}

void add_serve(CLI::App& app, commands& out) {
  auto [serve_cmd, serve] = add_command<serve_options>(
      app, out, serve_command, "serve",
      "Bring up the cluster behind an OpenAI-compatible HTTP API: /v1/completions, "
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
}

void add_transfer_peer(CLI::App& app, commands& out) {
  auto [peer_cmd, peer] = add_command<bench::transfer_peer_options>(
      app, out, bench::run_transfer_peer, "transfer-peer",
      "Helper process of the transfer benchmark and tests: serves one region");
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
}

void add_pool_master(CLI::App& app, commands& out) {
  auto [master_cmd, pool_master] = add_command<pool::master_process_options>(
      app, out, pool::run_master_process, "pool-master",
      "Run the KV pool's store master as its own process (published on a port)");
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
}

void add_pool_node(CLI::App& app, commands& out) {
  auto [node_cmd, pool_node] = add_command<pool::node_process_options>(
      app, out, pool::run_node_process, "pool-node",
      "Run one node's block owner as its own process, joined to a pool master");
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
}

void add_node(CLI::App& app, commands& out) {
  auto [host_cmd, node] = add_command<node_options>(
      app, out, node_command, "node",
      "Host one node of a cluster that spans processes (its block owner, decode "
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
}

void add_info(CLI::App& app, commands& out) {
  auto* info_cmd = app.add_subcommand("info", "Show what this binary was built with");
  out.push_back({info_cmd, [] { return info_command(); }});
}

} // namespace crescent::cli
