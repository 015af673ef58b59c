// What the experiments share: the clusters they derive from the paper cluster, what they read
// from a simulation's report, and how they write numbers.
#pragma once

#include "apps/experiment/experiment.hpp"
#include "apps/sim/sim_report.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::experiment {

/// `cfg` with `nodes` nodes like its first one: the first `prefill` with a prefill instance each,
/// the others with a decode instance each.
cluster_config with_split(cluster_config cfg, uint32_t nodes, uint32_t prefill);

/// Mean TTFT of the completed requests, in ms (0: none completed).
double mean_ttft_ms(const sim::sim_report& r);

/// Requests that completed within the TTFT SLO and TBT threshold `tbt_ms`, which must be one of
/// the report's thresholds (the paper's 100, 200, 300 ms and the cluster's TBT SLO); 0 otherwise.
size_t effective_at(const sim::sim_report& r, double tbt_ms);

/// Requests the conductor placed (it predicted their TTFT): completed, or rejected or failed
/// after placement.
size_t placed(const sim::sim_report& r);

/// The measures most experiments plot, as JSON: requests by status (rejections by reason), TTFT
/// mean and percentiles
/// (ms), TBT percentiles (ms), effective requests per TBT threshold, the hit rate (of prompt
/// tokens; the share read from other nodes apart) and the prefill GPU time per completed request.
json run_summary(const sim::sim_report& r);

/// `x` rounded to `decimals` places: what the JSON holds, so that it reads as the tables do.
double rounded(double x, int decimals);

/// A share in [0, 1] as a percentage with one decimal: "64.1%".
std::string percent(double share);

/// How `x` compares with `reference`: "+12.5%", "-3.0%" (relative), "n/a" when reference is 0.
std::string relative(double x, double reference);

/// `trace` with every request's output cut to `tokens` tokens.
std::vector<replay::trace_record> with_outputs(std::vector<replay::trace_record> trace,
                                               uint32_t tokens);

/// Whether `trace` is the synthetic trace shipped in data/ (3,993 requests, 61,194,628 prompt
/// tokens), for which REFERENCE.md gives reference values.
bool is_shipped_synthetic_trace(const std::vector<replay::trace_record>& trace);

} // namespace crescent::experiment
