// `crescent bench faults`: what each of issue 20's real-mode faults costs, against a run with no
// faults in the same invocation. Four node processes (2 prefill, 2 decode, each in a network
// namespace of its own: crescent up --netns) and a prefill node in the main process serve the
// head of a trace five times: no faults;
// kill -9 of a decode node; SIGSTOP of a prefill node for 2 s; a 2 s partition of a decode
// node; 5% packet loss between a prefill and a decode node for the whole run. Each run must end
// every request, decode the reference engine's tokens for every completed one, and settle; the
// table shows outcomes, failures by reason, TTFT p50 and p99, and p99 TTFT added against the
// run with no faults. docs/faults.md, docs/benchmarks.md.
#pragma once

#include <string>

namespace crescent::cli {

struct bench_faults_options {
  std::string trace_path = "data/synthetic_trace.jsonl";
  size_t requests = 200;
  double speedup = 4.0;
  uint32_t retries = 0; // request_retries_max of the runs' cluster
  std::string out_dir;  // runs' directories; empty: a new one under the temporary directory
};

/// 0 when every run ended every request and held its invariants, 1 otherwise, 2 when the runs
/// could not start (no namespaces here: the reason is printed).
int bench_faults(const bench_faults_options& opt);

} // namespace crescent::cli
