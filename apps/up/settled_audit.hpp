// What must hold once a run's requests have all ended and its faults stopped (docs/faults.md):
// no decode instance still holds a reservation, the store master holds no read lease (each
// ends its lease time after the get that took it), no block acknowledged on two or more nodes
// was lost while at most one node was lost, the conductor counts every node that was not
// killed as live (it places on all of them again) and no request as in flight (its load view
// holds no request that ended). Asked of the actors themselves, in real
// time here (crescent up); crescent chaos asks the same in simulated time.
#pragma once

#include "actors/cluster/cluster.hpp"
#include "actors/common/reply_type.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/actor_system.hpp>
#include <caf/expected.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace crescent::up {

/// Reservations a decode instance holds (queued and active), from its WorkerStats.
caf::expected<uint32_t> reservations_in(const typed_envelope<wire::WorkerStats>& worker_stats);
/// Blocks whose read lease has not ended, from the store master's StoreStats.
caf::expected<uint64_t> leased_blocks_in(const typed_envelope<wire::StoreStats>& store_stats);
/// Blocks acknowledged on two or more nodes that were lost anyway (never thinned by an approved
/// eviction), and the distinct nodes lost, from the store master's StoreStats.
struct replica_losses {
  uint64_t lost_replicated_blocks = 0;
  uint32_t nodes_lost = 0;
};
caf::expected<replica_losses>
replica_losses_in(const typed_envelope<wire::StoreStats>& store_stats);
/// Nodes the conductor counts as live, from its ConductorStats.
caf::expected<uint32_t> live_nodes_in(const typed_envelope<wire::ConductorStats>& conductor_stats);
/// Requests the conductor counts as placed and not ended, from its ConductorStats.
caf::expected<uint64_t>
requests_in_flight_in(const typed_envelope<wire::ConductorStats>& conductor_stats);

/// Asks an actor for its stats (stats_atom); nothing when it does not answer (it is gone).
/// Made from one generic callable (`[&](const auto& who) { return ask(who); }`) that answers
/// std::optional<reply_t<decltype(who), stats_atom>>.
struct stats_asker {
  std::function<std::optional<typed_envelope<wire::WorkerStats>>(const decode_worker_actor&)>
      decode;
  std::function<std::optional<typed_envelope<wire::StoreStats>>(const store_master_actor&)> store;
  std::function<std::optional<typed_envelope<wire::ConductorStats>>(const conductor_actor&)>
      conductor;

  template <class Ask>
  static stats_asker of(const Ask& ask) {
    return {ask, ask, ask};
  }
};

/// Asks once, through `ask`: what does not hold, one line each (empty: held).
std::vector<std::string> audit_once(const cluster& cl, const std::set<uint32_t>& killed,
                                    const stats_asker& ask);

/// Asks until all hold or `within` has passed (a silent node needs the conductor's heartbeat
/// timeout to count as live again); what still does not hold then, one line each (empty: held).
/// `lost` names the nodes killed or otherwise gone, asked again before each try: a process cut
/// off past the connection timeout may end while this waits (its own timeout can run out after
/// the main process's).
std::vector<std::string> audit_settled(caf::actor_system& sys, cluster& cl,
                                       const std::function<std::set<uint32_t>()>& lost,
                                       std::chrono::milliseconds within);

} // namespace crescent::up
