// `crescent up --netns`: every node process in a network namespace of its own, so that a fault
// plan's partitions and packet loss are real packets dropped by the kernel (nftables), not a
// filter inside a process.
//
// The run makes, and removes when it ends (also on SIGINT, SIGTERM and a failed start):
// - a bridge `crbr<id>` in this (the main process's) namespace with address 10.213.<s>.1/24,
//   where the conductor, the store master, the requests and the nodes without an address run;
// - for each node with an address a namespace `crescent-<id>-n<node>` holding one end of a veth
//   pair (`eth0`, address 10.213.<s>.<10 + node>) whose other end (`crv<id>n<node>`) is a port
//   of the bridge. The node's process is started in it (`ip netns exec`).
// <id> is this process's id; <s> is derived from it and moved past any subnet an address of
// this host is in already: two runs side by side do not meet.
//
// A partition of nodes S is a table of nftables rules in each namespace of S that drops every
// packet of the run's subnet to or from an address outside S (the main process is outside).
// A `drop` fault drops that share of the packets (the kernel's random numbers, not the plan's
// seed) between its node and its peer in the node's namespace, both ways. TCP carries the
// cluster's messages and KV bytes: a dropped packet is sent again, so packet loss delays
// messages and a partition stalls them, as on a real network; no message is lost by TCP itself.
// A fault's rules are one table (`crescent_f<k>`), added when it starts and deleted when it
// ends.
//
// With a link rate (`crescent up --link-mbit`), each namespace's veth pair is that node's NIC:
// a token bucket filter (tc's tbf) on both ends limits what the node sends and what it receives
// to the rate, as a real node's link does. The reference model's KV is small (about 500 bytes a
// token), so a slower link is how its hand-off gets the share of TTFT that LLaMA3-70B's takes on
// the paper's 100 Gbit/s links (docs/benchmarks.md). The main process's own traffic (nodes
// without an address) is not limited.
//
// Needs root, `ip` (iproute2, which also has `tc`) and `nft` (nftables); available() says why
// not otherwise.
#pragma once

#include "apps/up/fault_plan.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace crescent::up {

/// Nodes a run may place in namespaces (their addresses are 10.213.<s>.10 to .249).
inline constexpr uint32_t netns_nodes_max = 240;
/// The fastest link a run may give its nodes, in Mbit/s (400 Gbit/s).
inline constexpr uint32_t link_mbit_max = 400'000;

class netns_network {
 public:
  /// Whether this process may make namespaces and rules here; the error says why not.
  static caf::error available();

  /// Makes the bridge and a namespace for each of `nodes`; `work_dir` receives the rule files.
  /// `link_mbit` > 0 limits each node's link to that many Mbit/s each way (at most
  /// link_mbit_max); 0 leaves it as fast as the kernel's veth. On an error, whatever was made is
  /// removed.
  static caf::expected<std::unique_ptr<netns_network>>
  create(const std::vector<uint32_t>& nodes, const std::string& work_dir, uint32_t link_mbit = 0);

  /// The name of node `node`'s namespace, and of the bridge's end of its veth pair (tests look
  /// at them).
  std::string namespace_of(uint32_t node) const;
  std::string bridge_end_of(uint32_t node) const;

  /// Removes every namespace, link and rule the run made.
  ~netns_network();
  netns_network(const netns_network&) = delete;
  netns_network& operator=(const netns_network&) = delete;

  /// The bridge's address: where node processes reach the main process.
  const std::string& main_host() const { return main_host_; }
  /// Node `node`'s address in its namespace.
  std::string host_of(uint32_t node) const;
  /// The command prefix that runs a program in node `node`'s namespace.
  std::vector<std::string> exec_prefix(uint32_t node) const;

  /// Starts fault number `id` of the plan (a partition or a drop) / ends it. A fault that names
  /// a node without a namespace is refused.
  caf::error start_fault(size_t id, const fault& f);
  caf::error end_fault(size_t id, const fault& f);

  /// Removes what a run of process `pid` made (the signal watcher's cleanup, which cannot
  /// reach the object); errors are ignored, nothing may be left of it.
  static void remove_all(int pid, const std::vector<uint32_t>& nodes);

 private:
  netns_network() = default;

  // The namespaces fault `f` changes, each with the rules (nft syntax) of its table.
  caf::expected<std::map<uint32_t, std::string>> rules_of(const fault& f) const;

  int pid_ = 0;
  uint32_t subnet_ = 0; // the third byte of 10.213.<s>.0/24
  std::string main_host_;
  std::string work_dir_;
  std::vector<uint32_t> nodes_;
  std::map<size_t, std::vector<uint32_t>> active_; // fault id -> namespaces holding its table
};

} // namespace crescent::up
