// Where an actor runs: on the actor system's shared scheduler threads, or on a thread of its own.
//
// In real time, the actors that compute (prefill, decode and coupled workers: an engine call
// takes milliseconds) or block in system calls (the store master's RocksDB syncs, a block
// owner's SSD reads and writes) each get a thread of their own (CAF's detached actors), so that
// the conductor and the request actors, on the shared threads, are never queued behind them. In
// simulated time and in tests on CAF's deterministic scheduler every actor runs on the
// scheduler: a thread of its own would escape the virtual clock.
#pragma once

#include <caf/actor_system.hpp>
#include <caf/spawn_options.hpp>

#include <utility>

namespace crescent {

/// Spawns `fn(xs...)` on its own thread when `own_thread`, else on the shared scheduler.
template <class Fn, class... Ts>
auto spawn_placed(caf::actor_system& sys, bool own_thread, Fn fn, Ts&&... xs) {
  if (own_thread)
    return sys.spawn<caf::detached>(fn, std::forward<Ts>(xs)...);
  return sys.spawn(fn, std::forward<Ts>(xs)...);
}

} // namespace crescent
