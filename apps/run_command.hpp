// `crescent run`: bring up the embedded cluster, replay the head of a trace, print the report.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "apps/replay/real_time.hpp"
#include "apps/replay/workload.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace crescent::cli {

/// The trace shipped in the repository (data/README.md). Relative to the current directory, so
/// it is found from the repository root, where tools/run.sh runs crescent; anywhere else give
/// --trace (run_command says so, with the path it tried).
inline constexpr const char* default_trace_path = "data/synthetic_trace.jsonl";

struct run_options {
  std::string config_path; // empty: built-in defaults
  std::string trace_path = default_trace_path;
  uint32_t requests = 200;
  double speedup = 4.0;
  double output_scale = 1.0;
  bool progress = true;
  bool verbose = false;
  // How prefill sends KV to decode: "config" (the cluster file's prefill.stream_min_tokens),
  // "stream" (every prompt layer by layer), "after" (every prompt after its prefill), "ab"
  // (after, stream, after, stream: four runs of the same requests, and the TTFT ratio), or
  // "pairs" (one run of twins, one sent after and one streamed: replay::kv_send_pairs).
  std::string kv_send = "config";
};

/// Returns the process exit status: 0 if every request completed or was rejected, 1 if any
/// failed, 2 if the run could not start (bad config, bad trace, bring-up error).
int run_command(const run_options& opt);

// What `crescent up` and `crescent serve` share with `crescent run`.

/// The cluster file at `path` (empty: the built-in defaults), checked for a real-time run.
caf::expected<cluster_config> real_time_config(const std::string& path);

/// The requests of a run: the head of opt's trace, scaled to the cluster. Errors: a missing
/// default trace (said so), an unreadable trace or a bad line.
caf::expected<std::vector<replay::synthetic_request>> requests_for(const run_options& opt,
                                                                   const cluster_config& cfg);

/// What the run is (the trace, its scale, the cluster), printed before it starts.
std::string format_header(const run_options& opt, const cluster_config& cfg, size_t requests);

/// The report after a run: outcomes, TTFT and TBT, prefix hits, the hand-off, the KV moved.
std::string format_report(const replay::real_time_run& run, const cluster_config& cfg);

/// --kv-send pairs: of the `pairs` pairs of twins (requests 2i, 2i+1 of replay::kv_send_pairs),
/// each that both completed, their mean TTFTs sent after and streamed, the ratio of those means,
/// the median of the pairs' own ratios, and in how many pairs the streamed twin came first.
std::string format_kv_send_pairs(size_t pairs, const std::vector<replay::request_result>& results);

/// Applies --kv-send after or stream to `cfg`: every prompt sends its KV to decode once prefill
/// ends, or streams it layer by layer (prefill.stream_min_tokens at its limit, or 0); config
/// and ab leave it as it is. Error (bad_config): any but config on a coupled cluster.
caf::error apply_kv_send(const std::string& kv_send, cluster_config& cfg);

/// One round of --kv-send ab: the requests once, streamed or sent after, into `results`; its
/// exit status (0, 1; 2 or 130 when it did not start or was interrupted).
using ab_round = std::function<int(bool stream, std::vector<replay::request_result>& results)>;

/// --kv-send ab: four rounds in turn (after, stream, after, stream) so that a machine that
/// slows or warms up weighs on both alike, a line each, then the ratio of their mean TTFTs
/// (`where` follows it: where the rounds are). The worst round's status; a round of status 2
/// or 130 ends it there, with no ratio.
int run_ab_rounds(const ab_round& round, const std::string& where = {});

} // namespace crescent::cli
