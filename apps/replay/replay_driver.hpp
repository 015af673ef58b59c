// The replay driver: a client actor that submits synthesized trace requests to a cluster at
// their (sped-up) arrival times, collects every outcome, and answers `run` when all have ended.
// All timing goes through CAF's clock, so the same replay runs in real or simulated time.
#pragma once

#include "actors/cluster/cluster.hpp"
#include "apps/replay/report.hpp"
#include "apps/replay/workload.hpp"
#include "messages/atoms.hpp"

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <vector>

namespace crescent::replay {

using progress_atom = caf::atom_constant<caf::atom("progress")>;

using replay_driver_actor = caf::typed_actor<
    // start the replay; the answer comes when every request has ended
    caf::replies_to<run_atom>::with<void>,
    // internal: submit the requests whose arrival time has come
    caf::reacts_to<tick_atom>,
    // internal: print the progress line
    caf::reacts_to<progress_atom>>;

struct replay_options {
  /// Print a progress line to this stream every second (nullptr: silent).
  std::FILE* progress = nullptr;
  /// One request at a time, arrival times ignored: each is submitted `gap` after the one before
  /// ended (the gap lets what a request set off after its answer, such as storing its blocks,
  /// settle first), so that no two ever overlap.
  bool sequential = false;
  std::chrono::nanoseconds gap{std::chrono::seconds(1)};
  /// Called with each request actor as it is spawned, before its first message, and the id of
  /// its request: simulated time names it after the request in the message trace.
  std::function<void(const request_actor&, uint64_t)> on_spawn;
};

/// `results` receives one entry per request, in completion order. `cl` must outlive the driver.
replay_driver_actor spawn_replay_driver(caf::actor_system& sys, cluster& cl,
                                        std::vector<synthetic_request> requests,
                                        std::shared_ptr<std::vector<request_result>> results,
                                        replay_options options = {});

/// Makes request i when it is submitted (a whole trace's prompts at their true lengths would not
/// fit in memory at once): request i arrives arrivals_ns[i] after the start (non-decreasing).
using request_maker = std::function<synthetic_request(size_t)>;
replay_driver_actor spawn_replay_driver(caf::actor_system& sys, cluster& cl,
                                        std::vector<uint64_t> arrivals_ns, request_maker make,
                                        std::shared_ptr<std::vector<request_result>> results,
                                        replay_options options = {});

} // namespace crescent::replay
