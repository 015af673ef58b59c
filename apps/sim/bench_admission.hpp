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

#include <cstdint>
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

} // namespace crescent::sim
