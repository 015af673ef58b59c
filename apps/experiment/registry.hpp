// The experiments of `crescent experiment`, in the order `all` runs them, and those named by the
// issue that cannot run yet. Adding one: a file with its class and a make_NAME_experiment()
// (capacity.cpp is the smallest), one line in registry.cpp, one in apps/CMakeLists.txt.
#pragma once

#include "apps/experiment/experiment.hpp"

#include <memory>
#include <string_view>
#include <vector>

namespace crescent::experiment {

/// An experiment that is named but cannot run in this build, and why.
struct unavailable_experiment {
  std::string_view name;
  std::string_view figure;
  std::string_view description;
  std::string_view why;
};

const std::vector<std::unique_ptr<experiment>>& experiments();
const std::vector<unavailable_experiment>& unavailable_experiments();

/// Null when no experiment of that name can run.
const experiment* find_experiment(std::string_view name);
const unavailable_experiment* find_unavailable(std::string_view name);

// One per experiment file.
std::unique_ptr<experiment> make_capacity_experiment();
std::unique_ptr<experiment> make_local_vs_global_experiment();
std::unique_ptr<experiment> make_policies_experiment();
std::unique_ptr<experiment> make_replicas_experiment();
std::unique_ptr<experiment> make_bandwidth_experiment();
std::unique_ptr<experiment> make_pd_ratio_experiment();
std::unique_ptr<experiment> make_overload_experiment();
std::unique_ptr<experiment> make_scale_experiment();

} // namespace crescent::experiment
