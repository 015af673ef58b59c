// Carries out a fault plan against the node processes of a `crescent up` run, on a thread of its
// own, at the plan's times from start(): signals for kills and pauses, a new process for a
// killed node at its restart_after_ms (the main process's watch takes it back), queued signals that
// switch transfer faults on and off in every process (transfer_faults.hpp: the processes' hooks
// must be installed before start), nftables rules in the nodes' namespaces for partitions and drops
// (--netns), message faults switched on and off in the message gates (message_gate.hpp); each
// fault is logged with the time it happened, and so is its end.
#pragma once

#include "apps/up/fault_plan.hpp"
#include "apps/up/message_gate.hpp"
#include "apps/up/netns.hpp"
#include "apps/up/node_launch.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace crescent::up {

class fault_runner {
 public:
  /// `nodes` (and `network`, which partitions and drops need) must outlive the runner; the
  /// runner signals them and changes the network's rules until stop().
  /// `gates` (one per node process, without --netns) carry out the message faults; they too
  /// must outlive the runner. `restart` starts a killed node's process again (a kill's
  /// restart_after_ms), ready but not yet copying its output; the runner puts it in `nodes`.
  using restarter = std::function<caf::expected<node_process>(uint32_t node)>;
  fault_runner(const fault_plan& plan, std::vector<node_process>& nodes,
               const std::string& log_path, netns_network* network = nullptr,
               std::vector<message_gate*> gates = {}, restarter restart = {});
  ~fault_runner();
  fault_runner(const fault_runner&) = delete;
  fault_runner& operator=(const fault_runner&) = delete;

  /// Times count from now.
  void start();
  /// No more faults from now: partitions, drops and transfer faults under way end; a paused node
  /// stays paused (stop_nodes resumes it).
  void stop();
  /// Faults carried out so far (a pause and its end count once).
  size_t injected() const;

 private:
  struct action {
    uint64_t at_ms = 0;
    int signal = 0; // kill, pause and resume; 0: a network fault's start or end
    uint32_t node = 0;
    std::string what;
    size_t fault = 0; // network and transfer faults: the plan's index
    bool ends = false;
    std::optional<size_t> transfer; // a transfer fault's ordinal (transfer_faults_of)
    bool gate = false;              // a message fault: the message gates carry it out
    bool restart = false;           // a killed node's process starts again
  };

  void run(std::chrono::steady_clock::time_point start);
  void apply(const action& a, std::chrono::steady_clock::time_point start);
  void apply_network(const action& a, double at_ms);
  void end_network_faults();
  void apply_transfer(const action& a, double at_ms);
  void end_transfer_faults();
  void apply_gate(const action& a, double at_ms);
  void apply_restart(const action& a, double at_ms);
  void end_gate_faults();

  std::vector<action> actions_; // in time order
  std::vector<fault> faults_;   // the plan's
  netns_network* network_ = nullptr;
  std::vector<message_gate*> gates_;
  std::vector<node_process>& nodes_;
  restarter restart_;
  std::ofstream log_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<size_t> network_active_;  // faults started, not ended
  std::vector<action> transfer_active_; // switched on, not off
  std::vector<size_t> gate_active_;     // message faults switched on, not off
  size_t injected_ = 0;
  std::thread thread_;
};

} // namespace crescent::up
