// The progress of `crescent experiment` on stderr: which experiment of how many, which of its
// simulations, the time spent and an estimate of what is left (from the mean time of the runs
// so far and the runs the experiments planned). On a terminal each simulation's own bar
// (virtual time, requests ended) shows below its line.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

namespace crescent::experiment {

class progress {
 public:
  /// `planned_runs`: over all the experiments to run.
  progress(bool enabled, size_t experiments, size_t planned_runs);

  void begin_experiment(std::string_view name, size_t planned_runs);
  void begin_run(std::string_view label);
  void end_run();

  /// Whether a simulation should show its own bar (on a terminal only: elsewhere it would print
  /// a line every few seconds).
  bool simulation_bar() const { return enabled_ && tty_; }

  double elapsed_s() const;

 private:
  bool enabled_;
  bool tty_;
  size_t experiments_;
  size_t experiment_ = 0; // 1-based, of the one running
  std::string name_;
  size_t planned_total_, runs_done_ = 0;
  size_t planned_here_ = 0, run_here_ = 0; // this experiment's
  std::chrono::steady_clock::time_point started_;
};

/// "1:05" (minutes and seconds), "1:02:05" past an hour.
std::string format_duration(double seconds);

} // namespace crescent::experiment
