// `crescent bench fidelity`: a simulated run against a real one. The head of a trace runs for real
// on the embedded default cluster (the reference engine, measured, as `crescent run` runs it),
// then in simulated time on the same cluster with the modeled engine and a profile of the
// reference engine measured on this machine (`crescent profile`, or measured here first, with
// its warm-up after idle unless `warmup` is false). The target: median TTFT and median TBT
// within 20% of each other; the errors at p50 and p90 are printed, with the prefill compute,
// the rest of TTFT, every token interval and each request's first one. Real time on these
// shared 2-core machines is noisy: a run's figures vary, within the hour too.
#pragma once

#include <cstdint>
#include <string>

namespace crescent::sim {

struct bench_fidelity_options {
  std::string trace_path = "data/synthetic_trace.jsonl";
  uint32_t requests = 200;
  double speedup = 4.0;     // as crescent run's default
  std::string profile_path; // empty: measure the reference engine first
  std::string config_path;  // the cluster of both runs; empty: the embedded default
  bool warmup = true;       // the profile measured first has a warm-up section
};

int bench_fidelity(const bench_fidelity_options& opt);

} // namespace crescent::sim
