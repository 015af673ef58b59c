#include "apps/experiment/systems.hpp"

#include "apps/sim/paper_cluster.hpp"

namespace crescent::experiment {

caf::expected<cluster_config> cluster_of(const context& ctx, const compared_system& s) {
  if (!s.coupled)
    return ctx.paper_cluster();
  return sim::as_coupled(ctx.paper_cluster(), s.chunked_prefill, s.prefix_caching);
}

} // namespace crescent::experiment
