#include "apps/experiment/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace crescent::experiment {

progress::progress(bool enabled, size_t experiments, size_t planned_runs)
    : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0), experiments_(experiments),
      planned_total_(planned_runs), started_(std::chrono::steady_clock::now()) {}

double progress::elapsed_s() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void progress::begin_experiment(std::string_view name, size_t planned_runs) {
  ++experiment_;
  name_ = name;
  planned_here_ = planned_runs;
  run_here_ = 0;
}

void progress::begin_run(std::string_view label) {
  ++run_here_;
  // An experiment that runs more than it planned (a search that went further) adds its extra
  // runs to the total, so that the estimate never counts on runs already past.
  if (run_here_ > planned_here_) {
    ++planned_here_;
    ++planned_total_;
  }
  if (!enabled_)
    return;
  const double elapsed = elapsed_s();
  const size_t left = planned_total_ > runs_done_ ? planned_total_ - runs_done_ : 0;
  const std::string eta =
      runs_done_ == 0 ? "?" : format_duration(elapsed / static_cast<double>(runs_done_) * left);
  fmt::print(stderr, "[experiment {}/{} {}] run {}/{}: {}  (elapsed {}, ETA {})\n", experiment_,
             experiments_, name_, run_here_, planned_here_, label, format_duration(elapsed), eta);
  std::fflush(stderr);
}

void progress::end_run() {
  ++runs_done_;
}

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::lround(std::max(0.0, seconds)));
  if (s >= 3600)
    return fmt::format("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60);
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

} // namespace crescent::experiment
