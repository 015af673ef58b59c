// The order in which a simulation delivers ready messages: the one place a researcher changes to
// try another message scheduling. The simulation (sim_system.hpp) keeps CAF's guarantee that
// messages from one sender to one receiver arrive in the order sent: a policy picks which actor
// runs its next message, never which of an actor's messages comes first.
//
// FIFO (no policy) runs actors in the order they became ready, as CAF's test scheduler does;
// shuffled_delivery picks uniformly among the ready actors from a seed, to explore
// interleavings. Either way the same inputs and seed give the same run, bit for bit.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string_view>

namespace crescent::sim {

/// An actor with a message ready, as a policy sees it: who would receive what from whom.
struct ready_message {
  uint64_t receiver = 0;          // the receiving actor's label index (sim_system::labels)
  std::string_view receiver_name; // that label (conductor, prefill/3, request#81, ...)
  uint64_t sender = 0;            // the sender's label index; 0: anonymous (a timer, ...)
  std::string_view type;          // the operation (schedule, tokens, reply/ScheduleReply, ...)
  uint64_t bytes = 0;             // its Cap'n Proto payload
  int64_t now_ns = 0;             // the simulation's time
};

class delivery_policy {
 public:
  virtual ~delivery_policy() = default;
  /// Which of `ready` (never empty, in the order the actors became ready) runs its next
  /// message. Must be deterministic given the calls before it.
  virtual size_t pick(std::span<const ready_message> ready) = 0;
};

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
