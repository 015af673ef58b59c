// A fault plan (apps/up/fault_plan.hpp) carried out in simulated time on a cluster's real actors:
// the message filter of sim_system drops, duplicates and holds messages as the plan's message
// faults, partitions and pauses say, and an actor of its own ("faults") kills a node's actors at
// the plan's time. Which messages a probabilistic fault takes is drawn from a seed, in delivery
// order, so the same plan, seed and inputs give the same run.
//
// What a fault is here, against a real cluster (docs/faults.md):
//   kill      every actor of the node exits (exit_reason::kill): as a process killed with -9,
//             its peers learn it from their monitors, or from its silence; with
//             restart_after_ms, the node's actors are spawned anew that long after and the
//             conductor takes the node back (cluster::restart_local_node), as a rejoin;
//   pause     every message to the node's actors, its own timers included, waits until the
//             pause ends, then comes in order: as SIGSTOP and SIGCONT;
//   partition messages between the nodes named and every other place are lost while it lasts
//             (a connection that broke loses what was in flight);
//   drop, delay, duplicate, reorder: a matching message between two places is lost, held for
//             delay_ms, delivered twice, or held 1 to delay_ms ms (later ones overtake it);
//   fail_transfer, corrupt, delay_transfer: a KV slice of the cluster's transfer engine to or
//             from the node fails, has one byte changed on the way, or ends delay_ms later
//             (transfer_engine::set_fault_hook; the delay in modeled time: fault_delays::modeled).
// Messages within one place (an actor to itself, two actors of one node) and down and exit
// messages (made where they are received) are never taken by message faults or partitions.
#pragma once

#include "actors/cluster/directory.hpp"
#include "apps/sim/delivery_policy.hpp"
#include "apps/up/fault_plan.hpp"
#include "transport/transfer_engine.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace crescent {
class cluster;
}

namespace crescent::sim {

class sim_system;

/// Names a cluster's actors in `sim`'s message stream ("decode/1") and says where each runs;
/// with `only`, that node's actors alone (a node started again).
void label_actors(sim_system& sim, const directory& dir,
                  std::optional<uint32_t> only = std::nullopt);

/// Timed fault events and message faults listed in the log, at most (the counts go on).
inline constexpr size_t fault_log_lines_max = 200;

class fault_injector final : public message_filter {
 public:
  /// Carries out `plan` from now on (its times count from now) on the actors of `cl`, which
  /// `sim` runs and has labelled with their places (label_actors), and on the slices of
  /// `transfer` (null: no transfer faults); both must outlive it. `plan` must have passed
  /// up::check_sim_fault_plan. Set it as `sim`'s filter.
  fault_injector(sim_system& sim, cluster& cl, transport::transfer_engine* transfer,
                 up::fault_plan plan, uint64_t seed);
  ~fault_injector() override;
  fault_injector(const fault_injector&) = delete;
  fault_injector& operator=(const fault_injector&) = delete;

  fault_verdict judge(const ready_message& m) override;

  /// Messages each fault of the plan took (dropped, duplicated or held), by plan index.
  const std::vector<uint64_t>& taken() const;
  /// One line per fault event, with its simulated time from the start.
  const std::vector<std::string>& log() const;
  /// The log, and for each fault of the plan what it did ("faults.log").
  std::string format_log() const;

  struct state;

 private:
  std::shared_ptr<state> st_;
  transport::transfer_engine* transfer_;
};

} // namespace crescent::sim
