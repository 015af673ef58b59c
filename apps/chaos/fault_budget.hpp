// A fault budget: what `crescent chaos` may break in one seed's run, from which it draws a fault
// plan per seed (docs/faults.md). YAML, every field optional:
//
//   budget:
//     faults_max: 3          # faults per seed: 1 to this many
//     kinds: [kill, pause, partition, drop, delay, duplicate, reorder, fail_transfer, corrupt,
//             delay_transfer]
//     probability_max: 0.05  # a message fault takes each matching message with at most this
//     delay_ms_max: 200      # delay and reorder hold a message at most this long, and
//                            # delay_transfer a KV slice
//     late_copies: true      # a duplicate's copy comes 0 to delay_ms_max ms after its
//                            # original (drawn); false: at once
//     for_ms_max: 3000       # pauses, partitions and message faults last at most this long
//     nodes_lost_max: 1      # nodes killed in one run, at most
//     restart_ms_max: 2000   # half the kills drawn start their node again 1 to this many ms
//                            # later (a rejoin); 0: every kill is for good
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "apps/up/fault_plan.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::chaos {

struct fault_budget {
  uint32_t faults_max = 3;
  std::vector<up::fault_kind> kinds{up::fault_kind::kill,      up::fault_kind::pause,
                                    up::fault_kind::partition, up::fault_kind::drop,
                                    up::fault_kind::delay,     up::fault_kind::duplicate,
                                    up::fault_kind::reorder,   up::fault_kind::fail_transfer,
                                    up::fault_kind::corrupt,   up::fault_kind::delay_transfer};
  double probability_max = 0.05;
  uint64_t delay_ms_max = 200;
  // A copy sent again after a lost acknowledgement comes late, after the original was handled
  // (the class of bug a copy at once does not show: docs/faults.md, "Bugs campaigns found").
  bool late_copies = true;
  uint64_t for_ms_max = 3000;
  uint32_t nodes_lost_max = 1;
  // 0 draws no restarts, and draws every other fault as before restarts were drawn (the seeds
  // kept as regression tests were found so).
  uint64_t restart_ms_max = 2000;
};

inline constexpr uint32_t budget_faults_max = 64;

/// Parses a budget; errors name the source, the line and the field.
caf::expected<fault_budget> parse_fault_budget(const std::string& yaml_text,
                                               const std::string& source);
caf::expected<fault_budget> load_fault_budget(const std::string& path);

/// The plan of seed `seed`: 1 to faults_max faults of the budget's kinds, at times in
/// [0, span_ms], on `cfg`'s nodes; it passes up::check_sim_fault_plan. A pure function of its
/// arguments: the same seed draws the same plan on every machine.
up::fault_plan draw_fault_plan(const fault_budget& budget, const cluster_config& cfg, uint64_t seed,
                               uint64_t span_ms);

} // namespace crescent::chaos
