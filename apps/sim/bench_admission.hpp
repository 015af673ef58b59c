// `crescent bench admission`: early rejection under overload, in simulated time on the paper
// cluster (or a cluster file) and the synthetic trace.
//
// First the load the cluster sustains: the largest speedup of the trace's arrivals, on a grid
// of quarter steps, at which admission `none` still meets the TTFT and TBT SLOs for at least
// 99% of requests. Then, at twice that, one run per admission mode (none, current_load,
// predicted_load): requests admitted, effective requests (both SLOs met, at the cluster's TBT
// SLO), and the SLO attainment of the admitted ones. The baseline is `none` in the same run.
// The targets (issue 16): predicted_load more effective requests than current_load; both a
// higher attainment of admitted requests than none.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace crescent::sim {

struct bench_admission_options {
  std::string trace_path = "data/synthetic_trace.jsonl";
  std::string cluster_path;                // empty: the built-in paper cluster
  std::optional<uint32_t> tbt_slo_ms;      // default: the cluster's
  std::optional<double> sustained_speedup; // given: no search
};

int bench_admission(const bench_admission_options& opt);

/// The load a cluster sustains: the largest speedup on the grid of quarter steps up to 16 at
/// which `met_share` (the share of requests meeting both SLOs, admission none, at that speedup)
/// is at least 99%, taking the share to fall as the speedup rises: from 1, doubling while it
/// holds or halving while it does not, then halving the bracket. Errors: met_share's, or none at
/// or above 99%.
caf::expected<double>
find_sustained_speedup(const std::function<caf::expected<double>(double speedup)>& met_share);

} // namespace crescent::sim
