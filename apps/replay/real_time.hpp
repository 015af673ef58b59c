// A replay in real time: the cluster brought up on CAF's threaded scheduler, requests submitted
// at their (sped-up) arrival times by the wall clock, every outcome collected. What `crescent
// run` does, and the real side of `crescent bench fidelity`.
#pragma once

#include "actors/cluster/cluster.hpp"
#include "actors/cluster/cluster_config.hpp"
#include "apps/replay/report.hpp"
#include "apps/replay/workload.hpp"
#include "transport/transfer_types.hpp"

#include <caf/expected.hpp>

#include <cstdio>
#include <functional>
#include <vector>

namespace crescent::replay {

struct real_time_run {
  std::vector<request_result> results;        // in completion order
  std::vector<transport::path_metrics> moved; // the transfer engine's counters
  double wall_s = 0;
};

/// Errors: bring-up (with the reason), or the replay driver's. `progress`: a progress line every
/// second there (null: none). `started`, if given, is called once the cluster is up, just before
/// the first request is submitted, with nothing in flight yet on its transfer engine (crescent
/// up hooks its transfer faults there); `finished`, once every request has ended, before the
/// cluster stops (to audit it: crescent up). `sequential`: one request at a time, each a second
/// after the one before ended, arrival times ignored (replay_options::sequential).
caf::expected<real_time_run>
replay_in_real_time(const cluster_config& cfg, std::vector<synthetic_request> requests,
                    std::FILE* progress, const std::function<void(cluster&)>& started = {},
                    const std::function<void(caf::actor_system&, cluster&)>& finished = {},
                    bool sequential = false);

} // namespace crescent::replay
