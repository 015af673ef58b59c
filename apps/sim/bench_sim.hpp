// `crescent bench sim`: how fast simulated time runs the paper cluster, against real time (the
// baseline: a trace's span is the time a real cluster would take), with the targets.
//
//  - the synthetic trace (3,993 requests, 17 minutes of arrivals): at most 10 s of wall time,
//    run twice: the two JSON reports and message hashes must be identical;
//  - an hour-long trace of about 12,000 requests, made by tiling the synthetic trace (copies one
//    after another, each copy's hash ids apart so that copies share no prefix, timestamps scaled
//    to span 3,600 s): at least 120x faster than real time (at most 30 s);
//  - peak RSS at most 2 GiB over all of them.
// Wall-clock figures vary with the machine's load; the ratio is printed per run.
#pragma once

#include "apps/replay/trace.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::sim {

struct bench_sim_options {
  std::string trace_path = "data/synthetic_trace.jsonl";
  uint32_t hour_copies = 3;  // copies of the trace tiled into the hour-long one
  double hour_span_s = 3600; // its span
};

/// `copies` copies of `trace` one after another, copy k's hash ids offset by k * (largest id + 1)
/// and every timestamp scaled so that the whole spans `span_s`.
std::vector<replay::trace_record> tile_trace(const std::vector<replay::trace_record>& trace,
                                             uint32_t copies, double span_s);

int bench_sim(const bench_sim_options& opt);

/// `crescent bench agreement`: the replay's hit rate on one pool node (one_pool_node_cluster,
/// one request at a time) against `crescent analyze hitrate` and REFERENCE.md's table, for
/// capacities of unbounded, 10M, 3M and 1M tokens; the target: equal to 3 decimals.
int bench_agreement(const std::string& trace_path);

} // namespace crescent::sim
