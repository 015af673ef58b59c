// How every Crescent process sets up its CAF actor system, and ends it, so that all of them
// behave alike.
#pragma once

#include <caf/actor_addr.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>

#include <chrono>

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
///
/// A networked system sends CAF's own heartbeats on every connection to another process and
/// closes one that has carried nothing for `liveness.timeout`: the actors of the process on its
/// other side are then down, here as after a crash (for a node process, its cluster has left,
/// and it ends). Without them a connection to a process cut off (a host gone without a reset, a
/// long partition) would wait for TCP's own retries, a quarter of an hour.
struct connection_liveness {
  std::chrono::milliseconds heartbeat{1000}; // 0: no heartbeats, and no timeout
  std::chrono::milliseconds timeout{30000};
};
void setup_actor_system(caf::actor_system_config& cfg, bool networked,
                        connection_liveness liveness = {});

/// Records an actor spawned with a thread of its own (spawn_placed), so that a system that does
/// not end within its limit can name the ones it still waits for.
void note_detached_actor(caf::actor_system& sys, const caf::actor_addr& who);

/// The longest a real-time process waits for its actor system to end once its actors have.
inline constexpr std::chrono::seconds actor_system_end_limit{3};

/// The actor system of a real-time process (`crescent run`, `node`, `serve`, `up`, the pool's
/// processes, `bench store` and `bench transfer`, and the tests that run a real-time cluster or
/// talk to other processes), set up by setup_actor_system, whose end is bounded.
///
/// Its destructor waits for every actor to end, as CAF's does, then for the messages they left
/// for other processes to leave, and ends the system within actor_system_end_limit. CAF 0.17
/// ends a system by waiting until every detached actor (one with a thread of its own: the
/// compute workers, the block owners, the store master) is destroyed, which waits for ever on
/// one that anything still references. At the end of most multi-process runs something did: a
/// message for another process waits in the mailbox of the middleman's broker, holding its
/// sender and the receiver's proxy, which holds the broker, so when the middleman stops with the
/// actors' last messages still there, none of them is ever destroyed. The destructor therefore
/// sees that mailbox emptied first (a request the broker answers after what was queued before
/// it). Should the system still not end within the limit (2 of 40 node processes of `crescent
/// up` at the time of writing, likely CAF 0.17's own bug: a private thread could keep a
/// reference to its detached actor, CAF issue #1196, fixed in 0.18; a test's plain actor system
/// that hung so under load had one reference left to a prefill worker, whose holder gdb did not
/// find), it says so on stderr, naming the detached actors still referenced
/// (note_detached_actor), and the process goes on without it: its threads wait, harmless, until
/// the process exits, and its memory is not freed.
class process_actor_system {
 public:
  explicit process_actor_system(bool networked, connection_liveness liveness = {});
  ~process_actor_system();
  process_actor_system(const process_actor_system&) = delete;
  process_actor_system& operator=(const process_actor_system&) = delete;

  caf::actor_system& get() noexcept;

  struct parts;

 private:
  parts* p_; // given up (never freed) when the system does not end within the limit
};

} // namespace crescent
