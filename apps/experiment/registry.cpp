#include "apps/experiment/registry.hpp"

#include <algorithm>

namespace crescent::experiment {

const std::vector<std::unique_ptr<experiment>>& experiments() {
  static const auto list = [] {
    std::vector<std::unique_ptr<experiment>> v;
    v.push_back(make_capacity_experiment());
    v.push_back(make_local_vs_global_experiment());
    v.push_back(make_policies_experiment());
    v.push_back(make_replicas_experiment());
    v.push_back(make_bandwidth_experiment());
    v.push_back(make_pd_ratio_experiment());
    v.push_back(make_overload_experiment());
    v.push_back(make_effective_capacity_experiment());
    v.push_back(make_prefill_time_experiment());
    v.push_back(make_scale_experiment());
    v.push_back(make_compression_experiment());
    return v;
  }();
  return list;
}

const experiment* find_experiment(std::string_view name) {
  const auto& all = experiments();
  auto i = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e->name() == name; });
  return i == all.end() ? nullptr : i->get();
}

} // namespace crescent::experiment
