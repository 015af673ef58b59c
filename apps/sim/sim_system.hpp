// Simulated time: an actor system on CAF's deterministic test scheduler and virtual clock, run as
// fast as the CPU allows. The cluster's real actors run on it unchanged; only the engine, the
// memory and transfer backend and the clock differ from a real run (docs/simulation.md).
//
// How time advances: every ready message is delivered, one at a time, in the delivery policy's
// order (FIFO by default); when none is left, the clock jumps to the earliest pending timer
// (a delayed message: a compute step's end, a transfer's end, a heartbeat, a request timeout)
// and fires it. Nothing reads the wall clock, so the same inputs give the same run.
//
// Every delivered message can be watched (message_tap): its virtual time, sender, receiver,
// type and payload bytes. The run keeps an xxh3 of that stream, so two runs can be compared by
// one number, and can write it to a file (message_log.hpp). An observer that needs what the
// actors tell each other (a message's Cap'n Proto payload) sets a payload tap.
#pragma once

#include "apps/sim/delivery_policy.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace crescent {
class envelope;
} // namespace crescent

namespace crescent::sim {

/// One delivered message, as the tap sees it.
struct delivered_message {
  int64_t time_ns = 0;
  uint32_t sender = 0; // label index (0: anonymous)
  uint32_t receiver = 0;
  uint32_t type = 0; // type index
  uint64_t bytes = 0;
};

class sim_config : public caf::actor_system_config {
 public:
  sim_config();
};

class sim_system {
 public:
  /// `policy` may be null (FIFO); it must outlive the system.
  explicit sim_system(delivery_policy* policy = nullptr);
  ~sim_system();
  sim_system(const sim_system&) = delete;
  sim_system& operator=(const sim_system&) = delete;

  caf::actor_system& system() { return sys_; }

  /// Virtual time since the system started.
  std::chrono::nanoseconds elapsed() const;

  /// Names an actor in the message stream (otherwise: its CAF name and id, "replay_driver#40"), and
  /// says where it runs: a node, or main_place (the default, where unlabeled actors run).
  void label(const caf::actor_addr& actor, std::string name, int32_t place = main_place);

  /// Called with every delivered message, before it is handled (null: none).
  using message_tap = std::function<void(const delivered_message&)>;
  void set_tap(message_tap tap) { tap_ = std::move(tap); }

  /// Called with every delivered message and its Cap'n Proto payload (null: it carries none),
  /// before it is handled (null tap: none). It reads; what it does must not reach the actors,
  /// or the run would no longer be the one the stream hash names.
  using payload_tap = std::function<void(const delivered_message&, const envelope*)>;
  void set_payload_tap(payload_tap tap) { payload_tap_ = std::move(tap); }

  /// Judges every message before it is delivered (null: none, every message is delivered); it
  /// must outlive the system. A message it drops, duplicates or holds shows in the stream (and
  /// its hash) as "drop:TYPE", "duplicate:TYPE" or "hold:TYPE".
  void set_filter(message_filter* filter) { filter_ = filter; }

  /// Called about every `every_messages` deliveries, for progress lines.
  void set_progress(std::function<void()> progress, uint64_t every_messages) {
    progress_ = std::move(progress);
    progress_every_ = every_messages;
  }

  /// Delivers messages and fires timers until `done()` holds; false if the system ran dry
  /// first (nothing ready, no timer left).
  bool run_until(const std::function<bool()>& done);

  /// Delivers what is ready now, firing no timer.
  void run_ready();

  uint64_t delivered() const { return delivered_; }
  /// xxh3-64 of every delivered message so far (time, sender, receiver, type, bytes).
  uint64_t stream_hash() const;

  /// Labels and types by index, for writing the stream out.
  const std::vector<std::string>& labels() const { return labels_; }
  const std::vector<std::string>& types() const { return types_; }

 private:
  void deliver_one();
  void choose_next();
  ready_message ready_of(const delivered_message& d);
  bool apply_fault(const delivered_message& m, const fault_verdict& v);
  void record(const delivered_message& m);
  delivered_message describe_front();
  const caf::mailbox_element* front_element() const;
  uint32_t label_of(const caf::abstract_actor* actor);
  uint32_t type_index(const std::string& type);

  sim_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  delivery_policy* policy_;
  message_filter* filter_ = nullptr;
  message_tap tap_;
  payload_tap payload_tap_;
  std::function<void()> progress_;
  uint64_t progress_every_ = 0;
  uint64_t delivered_ = 0;
  std::chrono::nanoseconds start_;
  std::unordered_map<uint64_t, uint32_t> label_by_actor_;
  std::unordered_map<std::string, uint32_t> type_by_name_;
  std::vector<std::string> labels_{"-"};
  std::vector<int32_t> places_{main_place}; // by label index
  // Messages the filter made (a duplicate) or already judged (a held one): delivered as they are
  // when they come, at their time, to their receiver from their sender. An address alone does
  // not name one: a copy whose receiver is gone when it comes is destroyed unseen, and a later
  // message may be allocated at its address, at an address that differs run to run.
  struct made_message {
    int64_t due_ns = 0;
    const void* receiver = nullptr;
    const void* sender = nullptr;
  };
  std::unordered_map<const caf::mailbox_element*, made_message> unfiltered_;
  void note_made(const caf::mailbox_element* e, int64_t due_ns, const void* receiver);
  bool made_here(const caf::mailbox_element* e, int64_t now_ns, const void* receiver);
  std::vector<std::string> types_;
  struct hash_state;
  std::unique_ptr<hash_state> hash_;
};

} // namespace crescent::sim
