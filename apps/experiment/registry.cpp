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
    v.push_back(make_scale_experiment());
    return v;
  }();
  return list;
}

const std::vector<unavailable_experiment>& unavailable_experiments() {
  // Both compare with a coupled (vLLM-style) instance, prefill and decode on the same GPUs,
  // which the cluster cannot run yet.
  static const std::vector<unavailable_experiment> list = {
      {"effective-capacity", "Figs. 1, 6, 7",
       "share of requests meeting TTFT 30 s and TBT <= x, x from 50 ms to 1 s: Crescent vs "
       "coupled baselines, 16 nodes each",
       "needs the coupled (vLLM-style) baseline instance, not built yet"},
      {"prefill-time", "Fig. 8",
       "average prefill GPU time per request, Crescent vs the coupled baselines",
       "needs the coupled (vLLM-style) baseline instance, not built yet"}};
  return list;
}

const experiment* find_experiment(std::string_view name) {
  const auto& all = experiments();
  auto i = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e->name() == name; });
  return i == all.end() ? nullptr : i->get();
}

const unavailable_experiment* find_unavailable(std::string_view name) {
  const auto& all = unavailable_experiments();
  auto i = std::find_if(all.begin(), all.end(), [&](const auto& e) { return e.name == name; });
  return i == all.end() ? nullptr : &*i;
}

} // namespace crescent::experiment
