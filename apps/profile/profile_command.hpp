// `crescent profile`: measures the reference engine on this machine and writes a profile that the
// modeled engine reads (a `fit:` section, gpu/modeled_profile.hpp), so that a simulated run of
// the reference cluster can be compared with a real one (`crescent bench fidelity`).
//
// Prefill calls of n new tokens after p cached ones, over a grid of (n, p) up to the chunk size
// and the context limit, and decode steps of B sequences of c tokens, over a grid of (B, c) up
// to decode.batch_max; each point the median of `repeats` calls. Least squares (relative error,
// non-negative terms) fits
//   prefill_ns = base + per_token n + per_key (n p + n (n + 1) / 2) + per_cached_token p
//   decode_ns  = base + per_sequence B + per_context_token sum (c_i + 1)
// and the links are in-process copies: memcpy's bandwidth, measured too. The fit's errors are
// printed and written into the profile. Last (unless `warmup` is false), the warm-up after idle
// (modeled_profile.hpp): a prefill chunk and a decode step of one sequence made after the thread
// slept 1 to 400 ms, over the same calls back to back (the `warmup:` section; at most 9 calls a
// point, since each one sleeps first). And the SSD tier as a block owner meets it, in the system's
// temporary directory: a page and 64 pages put and got back, the line through them giving the
// latency and the bandwidths (machine.ssd_*), so a simulated reference cluster may have one.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "gpu/modeled_profile.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace crescent::cli {

struct profile_options {
  std::string config_path; // the cluster whose model and limits to measure; empty: built in
  std::string out_path;    // the profile file to write
  std::string name = "reference-cpu";
  uint32_t repeats = 5;
  bool quick = false; // a smaller grid, for tests
  bool warmup = true; // measure the warm-up after idle too (the `warmup:` section)
};

struct measured_profile {
  std::string yaml;  // the profile file, what --out writes
  std::string table; // every point: measured, fitted, error
  std::shared_ptr<const gpu::modeled_profile> profile;
};

/// Measures the reference engine of `cfg` (its model, chunk size, batch and context limits) and
/// fits the profile. Errors: another engine kind, an engine error, a fit that fails.
caf::expected<measured_profile> measure_profile(const cluster_config& cfg,
                                                const profile_options& opt);

int profile_command(const profile_options& opt);

} // namespace crescent::cli
