// A message gate: a relay on the path of every CAF message between a `crescent up` run's main
// process and one node process, that drops, delays, duplicates and reorders whole messages as
// the fault plan says (docs/faults.md). The main process reaches the node through the gate's
// port; the gate reads CAF's BASP stream frame by frame (a 32-byte header, then the payload it
// announces) and forwards every frame unchanged unless an active fault takes it.
//
// What a fault may take: message frames (BASP direct and routed messages) only; handshakes,
// monitors, down messages and heartbeats always pass, in order. A frame's type is the atom that
// leads its message (schedule, tokens, kv_ready, ...; the names `crescent replay --messages`
// shows) or `reply`. A gate decides each frame once, on the side where it enters the gate's
// link: a frame from the node, or a frame of the main process to the node; a frame that another
// node sent through the main process (BASP's routed message) was decided at that node's gate
// and passes. A frame's ends (the process of each, and the role of each actor) come from the
// gate_directory the main process gives every gate once the cluster is up: the headers name
// actors by their ids in their processes, and a routed message names both processes by CAF node
// id before its message.
//
// Threads: one per gate, polling its connections; activate/deactivate and the counters may be
// called from any thread. Limits: 64 connections, 64 MiB a frame (CAF's envelope limit), 4096
// frames held at once (past it a frame to hold passes at once, counted as `overflow`).
#pragma once

#include "apps/up/fault_plan.hpp"

#include <caf/expected.hpp>

#include <caf/node_id.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace crescent::up {

/// What a gate sees in one BASP frame (header and payload).
struct frame_view {
  bool message = false; // a direct or routed message: faults may take it
  bool routed = false;  // sent by another node through the main process
  std::string type;     // its leading atom, or "reply"; empty where it has none
  uint64_t source_actor = 0, dest_actor = 0; // ids in their processes
};

/// Who is who on the wire, made by the main process once the cluster is up.
struct gate_directory {
  /// Each process's CAF node id, as CAF serializes it, and its place (a node, or main_place).
  std::vector<std::pair<std::vector<std::byte>, int32_t>> places;
  /// The role of each actor of the cluster (fault_roles) by its place and its id there.
  std::map<std::pair<int32_t, uint64_t>, std::string> roles;

  /// Adds a process; `node` is its CAF node id.
  void add_place(const caf::node_id& node, int32_t place);
  /// The place of the process whose serialized node id starts `bytes` (and its length); nullopt
  /// where it is none of them.
  std::optional<std::pair<int32_t, size_t>> place_at(std::span<const std::byte> bytes) const;
  /// An actor's role; an actor of the main process not in the table is a request (the request
  /// actors come and go), one of a node is no role.
  std::string role_of(int32_t place, uint64_t actor) const;
};

/// Reads a whole frame; nullopt where it is shorter than its header says.
std::optional<frame_view> read_frame(std::span<const std::byte> frame);

/// The payload length a BASP header announces (the first 32 bytes of a frame).
uint32_t frame_payload_bytes(std::span<const std::byte, 32> header);

inline constexpr size_t frame_header_bytes = 32;
inline constexpr size_t gate_frame_bytes_max = 64ull << 20;
inline constexpr size_t gate_connections_max = 64;
inline constexpr size_t gate_held_frames_max = 4096;

struct gate_counts {
  uint64_t frames = 0; // message frames seen
  uint64_t dropped = 0;
  uint64_t delayed = 0; // held by a delay fault
  uint64_t duplicated = 0;
  uint64_t reordered = 0; // held by a reorder fault
  uint64_t overflow = 0;  // to be held, passed at once: the limit on held frames
};

class message_gate {
 public:
  /// Listens on 127.0.0.1 (an ephemeral port) and relays each connection to `host`:`port`, the
  /// node process `node`'s CAF port. `faults` are the plan's (their indices are what activate
  /// names); only message faults matter. Draws come from `seed` and the node.
  static caf::expected<std::unique_ptr<message_gate>>
  start(uint32_t node, std::string host, uint16_t port, std::vector<fault> faults, uint64_t seed);
  ~message_gate();
  message_gate(const message_gate&) = delete;
  message_gate& operator=(const message_gate&) = delete;

  uint16_t port() const { return port_; }
  uint32_t node() const { return node_; }

  /// Where each process is and who each actor is: until it is set, faults that name a role, a
  /// node or a peer take nothing.
  void set_directory(std::shared_ptr<const gate_directory> directory);

  /// The plan's fault `index` takes frames from now on / no longer. Held frames still leave at
  /// their times.
  void activate(size_t index);
  void deactivate(size_t index);

  gate_counts counts() const;

 private:
  struct relay;
  message_gate() = default;

  uint32_t node_ = 0;
  uint16_t port_ = 0;
  std::unique_ptr<relay> relay_;
};

} // namespace crescent::up
