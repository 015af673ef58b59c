// How every Crescent process sets up its CAF actor system, so that all of them behave alike.
#pragma once

#include <caf/actor_system_config.hpp>

namespace crescent {

/// Registers every message type, loads the middleman when the process talks to others, and
/// picks the work-sharing scheduler.
///
/// Why work sharing: CAF's default work-stealing workers, once idle, poll with sleeps (50 us,
/// then 10 ms) instead of waiting on a condition, so a request that reaches an idle process waits
/// for the sleeper. Measured here (2 cores, one round trip to a store master in another
/// process): 450 us with work stealing on both sides, 133 us with work sharing, whose idle
/// workers wake on a condition variable. Crescent's actors are few and exchange requests, which
/// is the case work sharing serves well.
void setup_actor_system(caf::actor_system_config& cfg, bool networked);

} // namespace crescent
