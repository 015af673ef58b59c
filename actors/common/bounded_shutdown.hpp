// Ending an actor system within a time limit.
//
// CAF's actor_system destructor waits for every detached actor's thread, and a detached actor's
// thread waits until the last reference to its actor is gone. Seen here (rare: about one run in
// eight of a refused join, and after a network partition): every actor had terminated
// (await_all_actors_done returned), yet one detached actor's object stayed referenced and the
// destructor waited for ever, so `crescent up` never printed its report or stopped its nodes.
// Which reference is left is not found yet. Until it is, a process that is done with its actor
// system ends it here: within the limit as usual, or else it says so on standard error, leaves
// the system to the process's end, and marks the process so that main() ends it with _Exit
// (static destructors would run under the still-waiting threads).
#pragma once

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <atomic>
#include <chrono>
#include <memory>

namespace crescent {

/// An actor system with its configuration, which must outlive it.
struct owned_actor_system {
  std::unique_ptr<caf::actor_system_config> config;
  std::unique_ptr<caf::actor_system> system;
};

/// Ends `s` (its destructor) within `limit`, or leaves it and sets actor_system_left().
void end_actor_system(owned_actor_system s, std::chrono::milliseconds limit);

/// Whether an actor system was left running: the process must end with _Exit.
bool actor_system_left();

} // namespace crescent
