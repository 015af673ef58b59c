// Carries out a fault plan against the node processes of a `crescent up` run, on a thread of its
// own, at the plan's times from start(); each fault is logged with the time it happened.
#pragma once

#include "apps/up/fault_plan.hpp"
#include "apps/up/node_launch.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace crescent::up {

class fault_runner {
 public:
  /// `nodes` must outlive the runner; the runner signals them until stop().
  fault_runner(const fault_plan& plan, std::vector<node_process>& nodes,
               const std::string& log_path);
  ~fault_runner();
  fault_runner(const fault_runner&) = delete;
  fault_runner& operator=(const fault_runner&) = delete;

  /// Times count from now.
  void start();
  /// No more faults from now; a paused node stays paused (stop_nodes resumes it).
  void stop();
  /// Faults carried out so far (a pause and its end count once).
  size_t injected() const;

 private:
  struct action {
    uint64_t at_ms = 0;
    int signal = 0;
    uint32_t node = 0;
    std::string what;
  };

  void run(std::chrono::steady_clock::time_point start);
  void apply(const action& a, std::chrono::steady_clock::time_point start);

  std::vector<action> actions_; // in time order
  std::vector<node_process>& nodes_;
  std::ofstream log_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  size_t injected_ = 0;
  std::thread thread_;
};

} // namespace crescent::up
