// `crescent node`: host one node of a cluster that spans processes. It reads the same cluster
// file as the cluster's main process (`crescent run --config`), runs the node's block owner
// (its DRAM arena and SSD tier), its prefill and decode instances, its transfer engine and its
// node agent,
// and waits for the main process to join it (actors/node_agent/node_agent.hpp). The agent and
// the engine's data-plane server listen on the host of the node's address (transfer.bind_host
// for a node given none), the agent on the address's port or --port. Prints one line when ready:
//   crescent-node node=<n> port=<p> pid=<pid>
// then serves until its cluster's main process goes away after joining, SIGINT or SIGTERM, or
// its standard input closes where that is a pipe (a parent process holding the other end). As
// it exits it prints its transfer counters, and with --transfer-faults the slices taken:
//   crescent-node node=<n> transfer faults: <f> slice attempts failed, <c> corrupted
#pragma once

#include <cstdint>
#include <string>

namespace crescent::cli {

struct node_options {
  std::string config_path;
  uint32_t node = 0;
  int32_t port = -1;   // -1: the port of nodes[node].address; 0: any free port
  std::string ssd_dir; // empty: store.ssd_dir/node-<n>, where an SSD tier is configured
  // crescent up's transfer faults (apps/up/transfer_faults.hpp): each off until the run's
  // fault runner switches it on with a signal. Empty: none, and no hook on the engine.
  std::string transfer_faults;
  uint64_t fault_seed = 1;
};

/// Returns the process exit status: 0 after serving, 2 if the node could not start.
int node_command(const node_options& opt);

} // namespace crescent::cli
