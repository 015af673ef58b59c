// The four systems of the paper's end-to-end figures (Figs. 1, 6, 7, 8), 16 nodes each:
// Crescent's disaggregated cluster and coupled (vLLM-style) instances, plain, with prefix
// caching and with chunked prefill (docs/coupled.md). Both effective-capacity and prefill-time
// run them.
#pragma once

#include "apps/experiment/experiment.hpp"

#include <array>

namespace crescent::experiment {

struct compared_system {
  const char* name;  // in the JSON
  const char* label; // in tables and plots
  bool coupled;
  bool chunked_prefill;
  bool prefix_caching;
};

inline constexpr std::array<compared_system, 4> compared_systems = {{
    {"crescent", "Crescent", false, false, false},
    {"coupled", "coupled (vLLM)", true, false, false},
    {"coupled_prefix_caching", "coupled + prefix caching", true, false, true},
    {"coupled_chunked_prefill", "coupled + chunked prefill", true, true, false},
}};

/// `s` on the context's paper cluster: the cluster itself (its conductor as configured), or its
/// 16 nodes as coupled instances routed by least_loaded (a load balancer that knows nothing of
/// caches, as the paper's vLLM deployment) without admission.
caf::expected<cluster_config> cluster_of(const context& ctx, const compared_system& s);

} // namespace crescent::experiment
