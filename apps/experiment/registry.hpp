// The experiments of `crescent experiment`, in the order `all` runs them. Adding one: a file with
// its class and a make_NAME_experiment() (capacity.cpp is the smallest), one line in registry.cpp,
// one in apps/CMakeLists.txt.
#pragma once

#include "apps/experiment/experiment.hpp"

#include <memory>
#include <string_view>
#include <vector>

namespace crescent::experiment {

const std::vector<std::unique_ptr<experiment>>& experiments();

/// Null when no experiment has that name.
const experiment* find_experiment(std::string_view name);

// One per experiment file.
std::unique_ptr<experiment> make_capacity_experiment();
std::unique_ptr<experiment> make_local_vs_global_experiment();
std::unique_ptr<experiment> make_policies_experiment();
std::unique_ptr<experiment> make_replicas_experiment();
std::unique_ptr<experiment> make_bandwidth_experiment();
std::unique_ptr<experiment> make_pd_ratio_experiment();
std::unique_ptr<experiment> make_overload_experiment();
std::unique_ptr<experiment> make_scale_experiment();
std::unique_ptr<experiment> make_effective_capacity_experiment();
std::unique_ptr<experiment> make_prefill_time_experiment();
std::unique_ptr<experiment> make_compression_experiment();

} // namespace crescent::experiment
