#include "apps/run_command.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "apps/replay/real_time.hpp"
#include "apps/replay/replay_driver.hpp"
#include "apps/replay/trace.hpp"
#include "apps/replay/transfer_report.hpp"
#include "apps/replay/workload.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <system_error>

namespace crescent::cli {

namespace {

int fail(const std::string& what) {
  fmt::print(stderr, "crescent run: {}\n", what);
  return 2;
}

// A missing default trace gets its own message: read_trace's "cannot read" would not say that the
// path is relative to the current directory, nor what to do. Nullopt: another trace, or there.
std::optional<std::string> missing_default_trace(const std::string& trace_path) {
  std::error_code ec;
  if (trace_path != default_trace_path || std::filesystem::exists(trace_path, ec))
    return std::nullopt;
  auto tried = std::filesystem::absolute(trace_path, ec);
  return fmt::format("the default trace {} is not there (tried {}; the path is relative to the "
                     "current directory, and the file ships in the repository's data/ folder): "
                     "run from the repository root or pass --trace FILE",
                     trace_path, ec ? trace_path : tried.string());
}

std::string format_handoff(const std::vector<replay::request_result>& results, bool coupled) {
  double tail_ms = 0, hidden = 0, queue_ms = 0;
  size_t n = 0;
  for (const auto& r : results)
    if (r.status == replay::outcome_status::completed) {
      tail_ms += static_cast<double>(r.kv_tail_ns) / 1e6;
      hidden += r.kv_hidden();
      queue_ms += static_cast<double>(r.prefill_queue_ns) / 1e6;
      ++n;
    }
  if (n == 0)
    return {};
  const auto count = static_cast<double>(n);
  if (coupled)
    return fmt::format("prefill queue {:.2f} ms mean wait at the coupled instance\n"
                       "KV hand-off   none: coupled instances decode where they prefill\n",
                       queue_ms / count);
  return fmt::format("prefill queue {:.2f} ms mean wait at the prefill instance\n"
                     "KV hand-off   {:.3f} ms mean after compute; {:.1f}% of the transfer hidden "
                     "behind compute (mean over {} requests)\n",
                     queue_ms / count, tail_ms / count, 100 * hidden / count, n);
}

// One line of an --kv-send ab round: its mean and p90 TTFT and where its hand-offs ended.
std::string format_ab_round(bool stream, const std::vector<replay::request_result>& results) {
  return fmt::format("{:<6}        mean TTFT {:.2f} ms, p90 {:.2f} ms\n{}",
                     stream ? "stream" : "after", replay::mean_ttft_ms(results),
                     replay::summarize(results).ttft_ms.p90, format_handoff(results, false));
}

// One round of `crescent run --kv-send ab`, in this process.
int run_round(const run_options& opt, cluster_config cfg,
              const std::vector<replay::synthetic_request>& requests, bool stream,
              std::vector<replay::request_result>& results) {
  if (auto err = apply_kv_send(stream ? "stream" : "after", cfg))
    return fail(describe(err));
  auto run = replay::replay_in_real_time(cfg, requests, opt.progress ? stderr : nullptr);
  if (!run)
    return fail(describe(run.error()));
  if (opt.progress)
    fmt::print(stderr, "\n");
  results = std::move(run->results);
  return replay::summarize(results).failed == 0 ? 0 : 1;
}

} // namespace

std::string format_kv_send_pairs(size_t pairs, const std::vector<replay::request_result>& results) {
  std::map<uint64_t, const replay::request_result*> by_id;
  for (const auto& r : results)
    by_id[r.id] = &r;
  auto ttft_ms = [](const replay::request_result& r) {
    return static_cast<double>(r.token_times_ns.front() - r.arrival_ns) / 1e6;
  };
  // The TTFT without the wait in the prefill queue: what the way of sending can change, apart
  // from which twin the queue served first.
  auto served_ms = [&](const replay::request_result& r) {
    return ttft_ms(r) - static_cast<double>(r.prefill_queue_ns) / 1e6;
  };
  double sum[2] = {0, 0}, tail_ms[2] = {0, 0}, served[2] = {0, 0}, compute_ms[2] = {0, 0};
  std::vector<double> ratios, served_ratios;
  size_t sooner = 0, served_sooner = 0;
  for (uint64_t i = 0; i < pairs; ++i) {
    const replay::request_result* pair[2] = {nullptr, nullptr}; // after, stream
    for (uint64_t id = 2 * i; id < 2 * i + 2; ++id) {
      auto r = by_id.find(id);
      if (r != by_id.end() && r->second->status == replay::outcome_status::completed &&
          !r->second->token_times_ns.empty())
        pair[replay::kv_send_pair_way(id) == wire::KvSend::STREAM ? 1 : 0] = r->second;
    }
    if (pair[0] == nullptr || pair[1] == nullptr)
      continue;
    for (int s = 0; s < 2; ++s) {
      sum[s] += ttft_ms(*pair[s]);
      tail_ms[s] += static_cast<double>(pair[s]->kv_tail_ns) / 1e6;
      served[s] += served_ms(*pair[s]);
      compute_ms[s] += static_cast<double>(pair[s]->prefill_compute_ns) / 1e6;
    }
    ratios.push_back(ttft_ms(*pair[1]) / ttft_ms(*pair[0]));
    sooner += ttft_ms(*pair[1]) < ttft_ms(*pair[0]) ? 1 : 0;
    served_ratios.push_back(served_ms(*pair[1]) / served_ms(*pair[0]));
    served_sooner += served_ms(*pair[1]) < served_ms(*pair[0]) ? 1 : 0;
  }
  const size_t n = ratios.size();
  if (n == 0)
    return fmt::format("pairs         none of {} completed both ways: no ratio\n", pairs);
  auto median = [n](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
  };
  const double count = static_cast<double>(n);
  return fmt::format(
      "after         mean TTFT {:.2f} ms ({:.2f} ms without the prefill queue), compute "
      "{:.2f} ms, KV hand-off {:.3f} ms after it\n"
      "stream        mean TTFT {:.2f} ms ({:.2f} ms without the prefill queue), compute "
      "{:.2f} ms, KV hand-off {:.3f} ms after it\n"
      "ratio         mean TTFT streamed / sent after: {:.3f}; per pair: median {:.3f}, "
      "streamed sooner in {} of {} (pairs of twins in one run; {} of {} pairs completed)\n"
      "              without the prefill queue: {:.3f}; per pair: median {:.3f}, streamed "
      "sooner in {} of {}\n",
      sum[0] / count, served[0] / count, compute_ms[0] / count, tail_ms[0] / count, sum[1] / count,
      served[1] / count, compute_ms[1] / count, tail_ms[1] / count, sum[1] / sum[0], median(ratios),
      sooner, n, n, pairs, served[1] / served[0], median(served_ratios), served_sooner, n);
}

caf::error apply_kv_send(const std::string& kv_send, cluster_config& cfg) {
  if (kv_send == "config")
    return caf::none;
  if (is_coupled(cfg))
    return make_error(errc::bad_config, "--kv-send chooses how prefill instances send KV to "
                                        "decode; coupled instances decode where they prefill");
  if (kv_send == "after" || kv_send == "stream")
    cfg.prefill.stream_min_tokens = kv_send == "stream" ? 0 : std::numeric_limits<uint32_t>::max();
  return caf::none;
}

int run_ab_rounds(const ab_round& round, const std::string& where) {
  double sum[2] = {0, 0};
  int status = 0;
  for (int i = 0; i < 4; ++i) {
    const bool stream = i % 2 == 1;
    std::vector<replay::request_result> results;
    const int rc = round(stream, results);
    if (rc == 2 || rc == 130)
      return rc; // did not start, or interrupted: no ratio
    status = std::max(status, rc);
    sum[stream ? 1 : 0] += replay::mean_ttft_ms(results);
    fmt::print("{}", format_ab_round(stream, results));
    std::fflush(stdout);
  }
  fmt::print("ratio         mean TTFT streamed / sent after: {:.3f} (two runs each{}{})\n",
             sum[0] == 0 ? 0 : sum[1] / sum[0], where.empty() ? "" : ", rounds in ", where);
  return status;
}

int run_command(const run_options& opt) {
  spdlog::set_level(opt.verbose ? spdlog::level::info : spdlog::level::err);
  if (opt.requests == 0 || opt.speedup <= 0 || opt.output_scale <= 0)
    return fail("--requests, --speedup and --output-scale must be positive");
  auto loaded_cfg = real_time_config(opt.config_path);
  if (!loaded_cfg)
    return fail(describe(loaded_cfg.error()));
  auto cfg = std::move(*loaded_cfg);
  if (auto err = apply_kv_send(opt.kv_send, cfg))
    return fail(describe(err));
  auto loaded = requests_for(opt, cfg);
  if (!loaded)
    return fail(describe(loaded.error()));
  auto requests = std::move(*loaded);
  fmt::print("{}", format_header(opt, cfg, requests.size()));
  std::fflush(stdout); // the header before the progress line on stderr
  if (opt.kv_send == "ab")
    return run_ab_rounds([&](bool stream, std::vector<replay::request_result>& results) {
      return run_round(opt, cfg, requests, stream, results);
    });
  const size_t pairs = requests.size() / 2;
  // Pairs of twins one at a time: neither twin's compute shares the cores with the other's.
  auto run = replay::replay_in_real_time(cfg, std::move(requests), opt.progress ? stderr : nullptr,
                                         {}, {}, opt.kv_send == "pairs");
  if (!run)
    return fail(describe(run.error()));
  if (opt.progress)
    fmt::print(stderr, "\n");
  auto summary = replay::summarize(run->results);
  fmt::print("{}", format_report(*run, cfg));
  if (opt.kv_send == "pairs")
    fmt::print("{}", format_kv_send_pairs(pairs, run->results));
  for (const auto& r : run->results)
    if (r.status == replay::outcome_status::failed)
      fmt::print(stderr, "request {} failed: {}\n", r.id, r.reason);
  return summary.failed == 0 ? 0 : 1;
}

caf::expected<cluster_config> real_time_config(const std::string& path) {
  cluster_config cfg;
  if (!path.empty()) {
    auto loaded = load_cluster_config(path);
    if (!loaded)
      return std::move(loaded.error());
    cfg = std::move(*loaded);
  }
  if (auto err = check_real_time(cfg)) {
    // Its sentence, prefixed with the file it is about.
    const auto& ctx = err.context();
    const auto why = ctx.size() == 1 && ctx.match_element<std::string>(0)
                         ? ctx.get_as<std::string>(0)
                         : describe(err);
    return make_error(errc::bad_config, path + ": " + why);
  }
  return cfg;
}

caf::expected<std::vector<replay::synthetic_request>> requests_for(const run_options& opt,
                                                                   const cluster_config& cfg) {
  if (auto missing = missing_default_trace(opt.trace_path))
    return make_error(errc::bad_config, *missing);
  auto records = replay::read_trace(opt.trace_path, opt.requests);
  if (!records)
    return std::move(records.error());
  replay::workload_options w{tokens_per_trace_block(cfg), cfg.model.vocab, opt.output_scale,
                             opt.speedup};
  if (opt.kv_send == "pairs")
    return replay::kv_send_pairs(*records, w);
  std::vector<replay::synthetic_request> requests;
  for (size_t i = 0; i < records->size(); ++i)
    requests.push_back(replay::synthesize((*records)[i], i, w));
  return requests;
}

std::string format_header(const run_options& opt, const cluster_config& cfg, size_t requests) {
  const replay::workload_options w{tokens_per_trace_block(cfg), cfg.model.vocab, opt.output_scale,
                                   opt.speedup};
  uint32_t prefill = 0, decode = 0, coupled = 0, hosted = 0;
  for (const auto& n : cfg.nodes) {
    prefill += n.prefill_instances;
    decode += n.decode_instances;
    coupled += n.coupled_instances;
    hosted += n.hosted_elsewhere() ? 1 : 0;
  }
  std::string out = fmt::format("crescent run: {} requests from {}\n", requests, opt.trace_path);
  out += fmt::format("  scale       one trace block (512 tokens) = {} model tokens (input "
                     "x{:.5f}); outputs x{}; arrivals {}x faster than the trace\n",
                     w.block_tokens, replay::input_scale(w), w.output_scale, w.speedup);
  const std::string where =
      hosted == 0 ? "one process" : fmt::format("{} of them in `crescent node` processes", hosted);
  const std::string instances =
      coupled == 0 ? fmt::format("{} prefill, {} decode", prefill, decode)
                   : fmt::format("{} coupled ({}{})", coupled,
                                 cfg.coupled.chunked_prefill ? "chunked prefill" : "prefill first",
                                 cfg.coupled.prefix_caching ? ", prefix caching" : "");
  const std::string engine =
      cfg.engine.kind == gpu::engine_kind::cuda
          ? fmt::format("the reference model on CUDA device {} (docs/gpu.md)", cfg.engine.device)
          : "reference engine on the CPU";
  out += fmt::format(
      "  cluster     {} nodes ({}), {}, a block owner per node; model {} layers, d_model {}, "
      "vocab {}, {}\n",
      cfg.nodes.size(), where, instances, cfg.model.layers, cfg.model.d_model, cfg.model.vocab,
      engine);
  if (cfg.codec.kind != storage::codec::codec_kind::none)
    out += fmt::format("  kv_codec    {}: pool blocks{} compressed (docs/kv_compression.md)\n",
                       storage::codec::to_string(cfg.codec.kind),
                       cfg.codec.handoff ? " and the hand-off" : "");
  return out;
}

std::string format_report(const replay::real_time_run& run, const cluster_config& cfg) {
  std::string out = replay::format_summary(replay::summarize(run.results));
  out += format_handoff(run.results, is_coupled(cfg));
  out += replay::format_transfer_metrics(run.moved);
  out += fmt::format("wall time     {:.2f} s\n", run.wall_s);
  return out;
}

} // namespace crescent::cli
