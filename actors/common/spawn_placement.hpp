// Where an actor runs: on the actor system's shared scheduler threads, or on a thread of its own.
//
// In real time, the actors that compute (prefill, decode and coupled workers: an engine call
// takes milliseconds) or block in system calls (the store master's RocksDB syncs, a block
// owner's SSD reads and writes) each get a thread of their own (CAF's detached actors), so that
// the conductor and the request actors, on the shared threads, are never queued behind them. In
// simulated time and in tests on CAF's deterministic scheduler every actor runs on the
// scheduler: a thread of its own would escape the virtual clock.
#pragma once

#include "actors/common/actor_system_setup.hpp"

#include <caf/actor_cast.hpp>
#include <caf/actor_system.hpp>
#include <caf/spawn_options.hpp>

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <utility>

namespace crescent {

/// Spawns `fn(xs...)` on its own thread when `own_thread`, else on the shared scheduler.
template <class Fn, class... Ts>
auto spawn_placed(caf::actor_system& sys, bool own_thread, Fn fn, Ts&&... xs) {
  if (own_thread) {
    auto handle = sys.spawn<caf::detached>(fn, std::forward<Ts>(xs)...);
    note_detached_actor(sys, caf::actor_cast<caf::actor_addr>(handle));
    return handle;
  }
  return sys.spawn(fn, std::forward<Ts>(xs)...);
}

/// The nice value of a compute worker's own thread.
inline constexpr int compute_thread_nice = 10;

/// Called first in a compute worker's body (which runs on its own thread when it has one): that
/// thread yields the CPU to the shared threads (the conductor, the requests, the front door),
/// as an engine computing on a GPU would leave the host's cores to them. On this machine the
/// reference engine computes on the same two cores, and without it a 429 or a placement waits
/// behind a prefill's arithmetic. Linux keeps a nice value per thread; raising it needs no
/// privilege, and a failure changes nothing but the priority, so it is not reported.
inline void lower_compute_thread_priority(bool own_thread) {
  if (!own_thread)
    return;
  const auto tid = static_cast<id_t>(syscall(SYS_gettid));
  [[maybe_unused]] int ignored = setpriority(PRIO_PROCESS, tid, compute_thread_nice);
}

/// Called by a compute worker right before each engine call: on a thread of its own, it yields
/// its core once, so that the threads its last messages woke (a request actor waiting for its
/// token or first token, the conductor) run now rather than when this thread's time slice ends.
/// Why: at nice 10 the thread still keeps its core to the end of its slice while a woken thread
/// waits (EEVDF, Linux 6.6 on). Measured on the 2-core build machine (2026-12-06, the build
/// before and after alternating, docs/benchmarks.md): `crescent run` TBT p50 0.55 and 0.55 ms
/// before, 0.40 and 0.44 ms after (its p90 and p99 moved the other way, within the runs' noise);
/// under `crescent bench serve`'s overload a 429's p99 7.76 and 8.22 ms before, 5.19 and 6.10 ms
/// after. Unlike SCHED_IDLE (tried, docs/simulation.md, "Fidelity") the thread keeps its share of
/// the cores. A yield with nothing waiting returns at once; on the shared scheduler it would only
/// reorder, so it is not made there.
inline void yield_before_compute(bool own_thread) {
  if (own_thread)
    sched_yield();
}

} // namespace crescent
