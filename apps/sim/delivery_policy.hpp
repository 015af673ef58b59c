// The order in which a simulation delivers ready messages: the one place a researcher changes to
// try another message scheduling. The simulation (sim_system.hpp) keeps CAF's guarantee that
// messages from one sender to one receiver arrive in the order sent: a policy picks which actor
// runs its next message, never which of an actor's messages comes first.
//
// FIFO (no policy) runs actors in the order they became ready, as CAF's test scheduler does;
// shuffled_delivery picks uniformly among the ready actors from a seed, to explore
// interleavings. Either way the same inputs and seed give the same run, bit for bit.
//
// A message_filter (below) goes further, on purpose: it may drop a message, deliver it twice,
// or hold it back past later ones (fault plans, apps/sim/fault_injector.hpp).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string_view>

namespace crescent::sim {

/// An actor with a message ready, as a policy sees it: who would receive what from whom.
struct ready_message {
  uint64_t receiver = 0;          // the receiving actor's label index (sim_system::labels)
  std::string_view receiver_name; // that label (conductor, prefill/3, request/81, ...)
  uint64_t sender = 0;            // the sender's label index; 0: anonymous (a timer, ...)
  std::string_view sender_name;   // that label ("-": anonymous)
  std::string_view type;          // the operation (schedule, tokens, reply/ScheduleReply, ...)
  uint64_t bytes = 0;             // its Cap'n Proto payload
  int64_t now_ns = 0;             // the simulation's time
  // Where the actors run (sim_system::label): a node, or main_place (conductor, store master,
  // requests, the replay driver: the main process of a real cluster).
  int32_t receiver_place = 0;
  int32_t sender_place = 0;
  bool system = false; // a down or exit message: made where it is received, never sent
};

inline constexpr int32_t main_place = -1;

class delivery_policy {
 public:
  virtual ~delivery_policy() = default;
  /// Which of `ready` (never empty, in the order the actors became ready) runs its next
  /// message. Must be deterministic given the calls before it.
  virtual size_t pick(std::span<const ready_message> ready) = 0;
};

/// Uniform in [0, 1) from a seeded generator's raw numbers: std::uniform_real_distribution
/// differs between standard libraries, and a seed must name the same run everywhere.
inline double uniform_unit(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

/// A seeded uniform choice among the ready actors.
class shuffled_delivery final : public delivery_policy {
 public:
  explicit shuffled_delivery(uint64_t seed) : rng_(seed) {}
  size_t pick(std::span<const ready_message> ready) override {
    // Not std::uniform_int_distribution: its results differ between standard libraries.
    return static_cast<size_t>(rng_() % ready.size());
  }

 private:
  std::mt19937_64 rng_;
};

} // namespace crescent::sim

namespace crescent::sim {

/// What a message filter does with a ready message (sim_system::set_filter).
struct fault_verdict {
  enum class action { deliver, drop, duplicate, hold };
  action what = action::deliver;
  int64_t until_ns = 0; // hold: delivered again at this simulated time; duplicate: the copy
                        // is delivered then (0: queued at once)
};

/// Decides, message by message, whether a ready message is delivered, lost, delivered twice or
/// held back (a fault plan in simulated time: apps/sim/fault_injector.hpp). Must be
/// deterministic given the calls before it.
class message_filter {
 public:
  virtual ~message_filter() = default;
  virtual fault_verdict judge(const ready_message& m) = 0;
};

} // namespace crescent::sim
