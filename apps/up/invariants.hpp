// What must hold after a run, whatever was broken during it (docs/faults.md): every request
// ended, with one outcome (a failure with its reason), and every completed request decoded the
// tokens of one monolithic run of the reference engine (not checked under a kv_codec, which
// changes the KV on purpose: the report says so).
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "apps/replay/report.hpp"
#include "apps/replay/workload.hpp"

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace crescent::up {

struct invariant_report {
  size_t requests = 0;
  size_t ended = 0;          // with exactly one outcome
  size_t tokens_checked = 0; // completed requests compared with the reference engine
  size_t tokens_wrong = 0;   // of them, with other tokens
  // Why completed requests' tokens were not compared (empty: they were): a kv_codec quantizes
  // the KV that prefill reuses and decode reads, so another token than the exact reference's is
  // not an error there.
  std::string tokens_unchecked;
  std::vector<std::string> violations;
  std::vector<uint64_t> requests_violated; // the requests the listed violations name, each once
  bool held() const { return violations.empty(); }
};

/// At most this many violations are listed (the count goes on).
inline constexpr size_t violations_listed_max = 20;

/// The reference tokens of requests by id, kept across runs of the same requests (a chaos
/// campaign runs them once per seed; the monolithic reference is computed once).
using reference_cache = std::map<uint64_t, std::vector<uint32_t>>;

invariant_report check_invariants(const cluster_config& cfg,
                                  const std::vector<replay::synthetic_request>& requests,
                                  const std::vector<replay::request_result>& results,
                                  reference_cache* cache = nullptr);

std::string format_invariants(const invariant_report& r);

/// The tokens `prompt` decodes in one monolithic run of the reference engine for `model`.
std::vector<uint32_t> reference_tokens(const gpu::model_config& model,
                                       const std::vector<uint32_t>& prompt,
                                       uint32_t max_new_tokens);

} // namespace crescent::up
