#include "apps/experiment/experiment.hpp"
#include "apps/experiment/progress.hpp"

#include <chrono>

namespace crescent::experiment {

caf::expected<sim::simulation> context::simulate(const std::string& label, cluster_config cfg,
                                                 std::vector<replay::trace_record> records,
                                                 sim::simulate_options opt) {
  // One seed for everything a run draws: access keys, the store master's random placement and
  // the random policy's choices.
  cfg.access_key_seed = seed_;
  cfg.conductor.seed = seed_;
  opt.progress = bar_.simulation_bar();
  bar_.begin_run(label);
  const auto started = std::chrono::steady_clock::now();
  auto out = sim::simulate(std::move(cfg), std::move(records), opt);
  wall_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  bar_.end_run();
  if (out) {
    out->report.trace = trace_name_;
    out->report.seed = seed_;
  }
  return out;
}

} // namespace crescent::experiment
