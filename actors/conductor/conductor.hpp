// The conductor: places requests and keeps the load and cache view that placement needs.
#pragma once

#include "actors/cluster/directory.hpp"
#include "actors/conductor/conductor_actor.hpp"
#include "actors/conductor/time_model.hpp"
#include "actors/conductor/view.hpp"

#include <caf/actor_addr.hpp>
#include <caf/actor_system.hpp>

#include <chrono>
#include <memory>
#include <vector>

namespace crescent {

/// Requests the conductor remembers having placed, to refuse a second copy of a placement
/// (recent_ids): the last 65,536, minutes of arrivals at the paper cluster's rates.
inline constexpr size_t conductor_recent_placements_max = 65536;

struct conductor_options {
  uint32_t nodes = 0;
  std::vector<uint32_t> prefill_node; // node of each prefill instance
  std::vector<uint32_t> decode_node;  // node of each decode instance
  uint32_t prefill_queue_max = 256;   // jobs per prefill instance
  // Prefill groups (CPP): consecutive instances of this many take jobs as one, at the first;
  // the time model predicts their pipeline (time_model::set_pipeline).
  uint32_t prefill_group = 1;
  // Coupled instances (docs/coupled.md): prefill instance i and decode instance i are one
  // coupled instance, so a request decodes where it prefills.
  bool coupled = false;
  std::chrono::milliseconds heartbeat_timeout{5000};
  // How often it looks for nodes that went silent (no heartbeat within heartbeat_timeout) or
  // gone: the requests placed on them fail then, with the reason.
  std::chrono::milliseconds liveness_check{1000};
  size_t requests_in_flight_max = 1u << 20;
  // Placement (docs/scheduling.md): the policy, admission against the SLOs, Algorithm 1's
  // threshold, and the predictions they rest on.
  policy_kind policy = policy_kind::global_cache_aware;
  admission_mode admission = admission_mode::predicted_load;
  double kvcache_balancing_threshold = 1.5;
  double decode_tbt_slack = 0; // schedule_view::decode_tbt_slack
  bool ssd_index = true;       // follow blocks offloaded to SSD tiers (BlocksGone.offloaded)
  slo_targets slo;
  uint64_t seed = 1; // the random policy's
  uint32_t block_tokens = 16;
  uint64_t decode_capacity_tokens = 0;     // KV memory of one decode instance, in tokens
  std::shared_ptr<const time_model> model; // required
  // Whose BlocksGone to believe: the store master's (none: the index only grows).
  caf::actor_addr store_master;
  // Who may report for each prefill instance (PrefillReport): the instance's worker (or, in a
  // coupled cluster, the coupled worker of that index), as the process's directory says now
  // (a rejoin publishes a node's new workers); without it no report is taken.
  directory_ref dir;
};

conductor_actor spawn_conductor(caf::actor_system& sys, conductor_options options);

} // namespace crescent
