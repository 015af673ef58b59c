// `crescent node`: host one node of a cluster that spans processes. It reads the same cluster
// file as the cluster's main process (`crescent run --config`), runs the node's block owner
// (its DRAM arena and SSD tier), its prefill and decode instances, its transfer engine and its
// node agent,
// and waits for the main process to join it (actors/node_agent/node_agent.hpp). The agent and
// the engine's data-plane server listen on the host of the node's address (transfer.bind_host
// for a node given none), the agent on the address's port or --port. Prints one line when ready:
//   crescent-node node=<n> port=<p> pid=<pid>
// then serves until its cluster's main process goes away after joining, SIGINT or SIGTERM, or
// its standard input closes where that is a pipe (a parent process holding the other end).
#pragma once

#include <cstdint>
#include <string>

namespace crescent::cli {

struct node_options {
  std::string config_path;
  uint32_t node = 0;
  int32_t port = -1;   // -1: the port of nodes[node].address; 0: any free port
  std::string ssd_dir; // empty: store.ssd_dir/node-<n>, where an SSD tier is configured
};

/// Returns the process exit status: 0 after serving, 2 if the node could not start.
int node_command(const node_options& opt);

} // namespace crescent::cli
