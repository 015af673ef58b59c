// `crescent bench ...`: each benchmark against a baseline measured in the same run
// (apps/cli/commands.hpp).
#include "actors/cluster/cluster_config.hpp"
#include "apps/bench/bench_gpu.hpp"
#include "apps/bench/bench_kv_codec.hpp"
#include "apps/bench/bench_serve.hpp"
#include "apps/bench/bench_store.hpp"
#include "apps/bench/bench_transfer.hpp"
#include "apps/cli/commands.hpp"
#include "apps/sim/bench_admission.hpp"
#include "apps/sim/bench_conductor.hpp"
#include "apps/sim/bench_fidelity.hpp"
#include "apps/sim/bench_sim.hpp"
#include "apps/up/bench_faults.hpp"

#include <string>

namespace crescent::cli {

namespace {

void add_transfer_bench(CLI::App* bench_cmd, commands& out) {
  auto [transfer_cmd, transfer] = add_command<bench::bench_transfer_options>(
      *bench_cmd, out, bench::bench_transfer, "transfer",
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
}

void add_faults_bench(CLI::App* bench_cmd, commands& out) {
  auto [faults_cmd, faults_bench] = add_command<bench_faults_options>(
      *bench_cmd, out, bench_faults, "faults",
      "Real-mode faults (kill, SIGSTOP, partition, 5% packet loss) on 4 node processes "
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
  faults_cmd
      ->add_option("--retries", faults_bench.retries,
                   "request_retries_max of the runs' cluster: failed attempts placed again")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{0}, request_retries_limit));
  faults_cmd->add_option("--out", faults_bench.out_dir, "Where the runs' directories go");
}

void add_sim_bench(CLI::App* bench_cmd, commands& out) {
  auto [sim_cmd, bench_sim] = add_command<sim::bench_sim_options>(
      *bench_cmd, out, sim::bench_sim, "sim",
      "Simulated time on the paper cluster vs real time: the synthetic trace twice "
      "(speed, determinism) and an hour-long tiled trace (apps/sim/bench_sim.hpp)");
  sim_cmd->add_option("--trace", bench_sim.trace_path, "The trace (and the tiles' source)")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
  sim_cmd->add_option("--hour-copies", bench_sim.hour_copies, "Copies tiled into the hour")
      ->capture_default_str()
      ->check(CLI::Range(1u, 64u));
}

void add_agreement_bench(CLI::App* bench_cmd, commands& out) {
  auto [agreement_cmd, agreement_trace] = add_command<std::string>(
      *bench_cmd, out, sim::bench_agreement, "agreement",
      "The replay's hit rate on one pool node, one request at a time, against "
      "crescent analyze hitrate and the reference table, at 4 capacities");
  agreement_trace = "data/synthetic_trace.jsonl";
  agreement_cmd->add_option("--trace", agreement_trace, "The trace")
      ->capture_default_str()
      ->check(CLI::ExistingFile);
}

void add_fidelity_bench(CLI::App* bench_cmd, commands& out) {
  auto [fidelity_cmd, fidelity] = add_command<sim::bench_fidelity_options>(
      *bench_cmd, out, sim::bench_fidelity, "fidelity",
      "A simulated run against a real one: the head of a trace on the embedded "
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
}

void add_conductor_bench(CLI::App* bench_cmd, commands& out) {
  auto [conductor_cmd, conductor_bench] = add_command<sim::bench_conductor_options>(
      *bench_cmd, out, sim::bench_conductor, "conductor",
      "Conductor decisions per second and their latency, the policy alone and "
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
}

void add_admission_bench(CLI::App* bench_cmd, commands& out) {
  auto [admission_cmd, admission_bench] = add_command<sim::bench_admission_options>(
      *bench_cmd, out, sim::bench_admission, "admission",
      "Early rejection at twice the load the cluster sustains: admission none, "
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
}

void add_store_bench(CLI::App* bench_cmd, commands& out) {
  auto [store_cmd, store] = add_command<bench::bench_store_options>(
      *bench_cmd, out, bench::bench_store, "store",
      "KV pool (master and nodes on loopback) vs memcached and redis-server");
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
}

void add_kv_codec_bench(CLI::App* bench_cmd, commands& out) {
  auto [kv_codec_cmd, kv_codec] = add_command<bench::bench_kv_codec_options>(
      *bench_cmd, out, bench::bench_kv_codec, "kv-codec",
      "KV codecs (int8, kivi2/4, kvquant3/4) vs full-precision KV on the reference "
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
}

void add_gpu_bench(CLI::App* bench_cmd, commands& out) {
  auto [gpu_cmd, gpu_bench] = add_command<bench::bench_gpu_options>(
      *bench_cmd, out, bench::bench_gpu, "gpu",
      "The device engine (CUDA) vs the CPU reference engine in the same run: prefill and "
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
}

void add_serve_bench(CLI::App* bench_cmd, commands& out) {
  auto [serve_bench_cmd, serve_bench] = add_command<bench::bench_serve_options>(
      *bench_cmd, out, bench::bench_serve, "serve",
      "crescent serve's HTTP front door: a trace replayed over HTTP against the same "
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
}

} // namespace

void add_bench(CLI::App& app, commands& out) {
  auto* bench_cmd = app.add_subcommand("bench", "Benchmarks, each against a baseline measured in "
                                                "the same run");
  bench_cmd->require_subcommand(1);
  for (auto add : {&add_transfer_bench, &add_faults_bench, &add_sim_bench, &add_agreement_bench,
                   &add_fidelity_bench, &add_conductor_bench, &add_admission_bench,
                   &add_store_bench, &add_kv_codec_bench, &add_gpu_bench, &add_serve_bench})
    add(bench_cmd, out);
}

} // namespace crescent::cli
