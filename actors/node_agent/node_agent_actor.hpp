// Interface of a node agent: one per node. It watches the node's actors and tells the conductor
// the node is alive. The agent of a node hosted by a `crescent node` process is also how the
// cluster's main process joins that node (node_agent.hpp).
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/actor.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <vector>

namespace crescent {

using node_agent_actor = caf::typed_actor<
    // begin heartbeats (sent by bring-up once the directory is complete)
    caf::reacts_to<start_atom>,
    // NodeJoin, the conductor, the store master -> NodeWelcome, the node's block owner, its
    // decode workers and its prefill workers in instance order; or an error (terms differ,
    // joined already, not hosted). Handles travel untyped: CAF carries caf::actor between
    // processes without registration.
    caf::replies_to<join_atom, typed_envelope<wire::NodeJoin>, caf::actor,
                    caf::actor>::with<typed_envelope<wire::NodeWelcome>, caf::actor,
                                      std::vector<caf::actor>, std::vector<caf::actor>>,
    // ClusterDirectory, every decode and every prefill worker of the cluster in instance order
    // -> done; after the join and before start, and again whenever another node rejoins. The
    // node's workers read it from then on (prefill workers: their decode instances, and the
    // other stages of a prefill group).
    caf::replies_to<directory_atom, typed_envelope<wire::ClusterDirectory>, std::vector<caf::actor>,
                    std::vector<caf::actor>>::with<void>,
    // internal: one heartbeat interval passed
    caf::reacts_to<tick_atom>,
    // internal: the time a node process waits to be taken back is over (spawn_hosted_node_agent)
    caf::reacts_to<deadline_atom>>;

} // namespace crescent
