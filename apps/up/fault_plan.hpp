// A fault plan: what to break, when (docs/faults.md). One format for real time (`crescent up`)
// and simulated time (`crescent replay --sim --faults`, `crescent chaos`). YAML:
//
//   faults:
//     - {at_ms: 2000, kill: 3}                      # node 3 stops for good
//     - {at_ms: 2000, kill: 3, restart_after_ms: 1000} # ... and a new process starts 1 s later
//     - {at_ms: 1000, pause: 2, for_ms: 2000}        # node 2 runs nothing for 2 s
//     - {at_ms: 500, partition: [1, 2], for_ms: 800} # nodes 1 and 2 cut from the others
//     - {at_ms: 0, drop: 0.05, node: 2, peer: 3}     # 5% of the messages between nodes 2, 3
//     - {at_ms: 0, delay: 0.1, delay_ms: 200, type: tokens, from: decode, to: request}
//     - {at_ms: 0, duplicate: 0.01, for_ms: 5000}
//     - {at_ms: 0, reorder: 0.02, delay_ms: 50}     # held 1..50 ms: later ones overtake it
//     - {at_ms: 0, corrupt: 0.01, node: 2}           # 1% of KV slices to or from node 2 changed
//     - {at_ms: 0, fail_transfer: 0.01}              # 1% of KV slices fail
//     - {at_ms: 0, delay_transfer: 0.1, delay_ms: 20} # 10% of KV slices start 20 ms late
//
// Times count from the first request's submission. Message faults take only messages that
// cross from one place to another (a node, or the main process where the conductor, the store
// master and the requests run), chosen by `type` (the operation: schedule, tokens, reply, ...),
// `from` and `to` (roles), `node` (one end there) and `peer` (the other end there; "main": the
// main process), each with the fault's probability, drawn from the run's seed.
//
// Transfer faults (fail_transfer, corrupt, delay_transfer) take KV slices of the transfer engine
// (in-process, shared-memory and TCP paths) whose remote end is on `node` (any, without it).
//
// What each mode carries out: `crescent up` kills and pauses node processes, fails, corrupts and
// delays their KV slices (transfer_faults.hpp), drops, delays, duplicates and reorders whole
// messages in its message gates (message_gate.hpp: between processes; with --netns, drops are of
// packets instead), and with --netns partitions the processes and drops their packets
// (check_fault_plan); simulated time carries out every kind (check_sim_fault_plan).
#pragma once

#include "actors/cluster/cluster_config.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crescent::up {

enum class fault_kind {
  kill,
  pause,
  partition,
  drop,
  delay,
  duplicate,
  reorder,
  fail_transfer,  // a KV transfer slice to or from `node` fails
  corrupt,        // a KV transfer slice to or from `node` has a byte changed on the way
  delay_transfer, // a KV transfer slice to or from `node` starts delay_ms late
};

/// The main process (conductor, store master, requests), as a message fault's `peer`.
inline constexpr int32_t main_place = -1;

/// Which messages a message fault (drop, delay, duplicate, reorder) takes; empty fields: any.
struct message_match {
  std::string type;            // the operation (schedule, tokens, ...), or reply
  std::string from, to;        // the sender's and the receiver's roles
  std::optional<int32_t> node; // one end on this node (never main_place)
  std::optional<int32_t> peer; // the other end here (a node, or main_place)

  /// Whether a message of `operation` from a `from_role` at `from_place` to a `to_role` at
  /// `to_place` is one this match takes, in simulated time (fault_injector) and through the
  /// message gates alike; an end whose place is not known matches no node.
  bool takes(std::string_view operation, std::string_view from_role, std::string_view to_role,
             std::optional<int32_t> from_place, std::optional<int32_t> to_place) const;
};

struct fault {
  fault_kind kind = fault_kind::kill;
  uint32_t node = 0;           // kill, pause
  std::vector<uint32_t> nodes; // partition: cut from every other place
  uint64_t at_ms = 0;
  uint64_t for_ms = 0;           // pause, partition: how long; message faults: 0 = to the end
  uint64_t restart_after_ms = 0; // kill: a new process for the node this long after (0: none)
  double probability = 1.0;      // message faults: of each matching message
  uint64_t delay_ms = 0;         // delay: how long a message is held; reorder: at most;
                                 // duplicate: how late the copy comes (0: at once);
                                 // delay_transfer: how late a slice starts
  message_match match;           // message faults
  int line = 0;                  // in the plan file, for messages
  bool is_message_fault() const { return kind >= fault_kind::drop && kind <= fault_kind::reorder; }
  bool is_transfer_fault() const { return kind >= fault_kind::fail_transfer; }
  /// Whether crescent up's message gates carry it out: every message fault, except a drop
  /// with --netns (`netns`), which the kernel does to packets.
  bool is_gate_fault(bool netns) const {
    return is_message_fault() && !(netns && kind == fault_kind::drop);
  }
};

struct fault_plan {
  std::vector<fault> faults; // in time order
};

inline constexpr size_t faults_max = 1024;
/// Transfer faults of a plan that crescent up carries out (one bit each: transfer_faults.hpp).
inline constexpr size_t transfer_faults_max = 64;
inline constexpr uint64_t fault_time_ms_max = 24ull * 3600 * 1000;
inline constexpr uint64_t fault_delay_ms_max = 3600ull * 1000; // transport::slice_delay_max

/// The roles a message fault's `from` and `to` name.
inline constexpr const char* fault_roles[] = {"conductor",   "store_master", "request",
                                              "block_owner", "node_agent",   "prefill",
                                              "decode",      "coupled"};

/// Parses a plan; errors name the source, the line and the field.
caf::expected<fault_plan> parse_fault_plan(const std::string& yaml_text, const std::string& source);
caf::expected<fault_plan> load_fault_plan(const std::string& path);

/// Checks the plan for `crescent up` (real time): kills, pauses and transfer faults (at most
/// transfer_faults_max; a launcher must pass `{faults}` on), and with `netns` (node processes in
/// network namespaces, netns.hpp) partitions and drops chosen by node and peer;
/// every node named runs in a process of its own; a node is not killed twice, nor paused after
/// it was killed or while paused. Other kinds are refused by name.
caf::error check_fault_plan(const fault_plan& plan, const cluster_config& cfg,
                            const std::string& source, bool netns = false);

/// Checks the plan for simulated time: every kind; the nodes it names exist; kills and pauses
/// as for check_fault_plan (a node need not have an address).
caf::error check_sim_fault_plan(const fault_plan& plan, const cluster_config& cfg,
                                const std::string& source);

/// The plan's word for a kind: "kill", "fail_transfer", ...; what parse_fault_plan reads.
const char* kind_name(fault_kind k);

/// "kill node 3", "pause node 2 for 2000 ms", "drop 5% of messages between node 2 and node 3".
std::string describe(const fault& f);

/// The plan as YAML that parse_fault_plan reads back the same (for a chaos seed's plan).
std::string format_fault_plan(const fault_plan& plan);

} // namespace crescent::up
