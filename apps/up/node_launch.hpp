// The node processes of a `crescent up` run: one `crescent node` per node of the cluster file
// that has an address, started through the file's launcher, each ready once it printed its
// ready line, each with its standard error (its log) in the run directory.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "apps/bench/child_process.hpp"

#include <caf/expected.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace crescent::up {

class netns_network;

struct node_process {
  uint32_t node = 0;
  bench::child_process process;
  std::string log_path;
  bool killed = false;
  bool paused = false;
  // Copies what the node prints after its ready line into its log as it comes, so that a node
  // that logs much never blocks on a full pipe.
  std::unique_ptr<std::thread> output;
};

/// The command that starts node `node` (cluster_config::launcher): a program and its arguments.
/// `flags` go after `crescent node`'s own (a launcher's command takes them at `{faults}`, each
/// quoted for the shell; nothing there without flags).
std::vector<std::string> launch_command(const cluster_config& cfg, const std::string& config_path,
                                        uint32_t node, const std::vector<std::string>& flags = {});

/// Starts every hosted node's process and waits for each to be ready (at most `timeout` each);
/// with `network`, each in its node's namespace. On an error the processes already started are
/// stopped, and the error names the node and its log. `flags`: every node's (launch_command).
caf::expected<std::vector<node_process>>
launch_nodes(const cluster_config& cfg, const std::string& config_path, const std::string& run_dir,
             std::chrono::milliseconds timeout, const netns_network* network = nullptr,
             const std::vector<std::string>& flags = {});

/// Starts node `node`'s process once more (after a kill), its log at `log_path`, as
/// launch_nodes does, and waits for it to be ready (at most `timeout`). Once it is where it
/// stays, copy_node_output copies what it prints on.
caf::expected<node_process> launch_node_again(const cluster_config& cfg,
                                              const std::string& config_path,
                                              const std::string& log_path, uint32_t node,
                                              std::chrono::milliseconds timeout,
                                              const netns_network* network = nullptr,
                                              const std::vector<std::string>& flags = {});

/// Copies what `x` prints after its ready line into its log, on a thread that holds `x`'s
/// address: `x` must not move from then on.
void copy_node_output(node_process& x);

/// Ends them: resumes paused ones, closes their input (they exit), waits for what they print as
/// they go (their transfer counters) to reach their logs, kills any still running after a
/// grace period, and reaps them all.
void stop_nodes(std::vector<node_process>& nodes);

} // namespace crescent::up
