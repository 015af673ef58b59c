// Where every actor of a cluster is. Bring-up fills it once, before the first request, and
// actors only read it while handling messages; the mailbox hand-off of that first message
// orders the writes before the reads. Clusters that span processes fill it from membership.
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/conductor/conductor_actor.hpp"
#include "actors/decode_worker/decode_worker_actor.hpp"
#include "actors/node_agent/node_agent_actor.hpp"
#include "actors/prefill_worker/prefill_worker_actor.hpp"
#include "actors/store_master/store_master_actor.hpp"

#include <cstdint>
#include <vector>

namespace crescent {

struct directory {
  conductor_actor conductor;
  store_master_actor store_master;
  std::vector<block_owner_actor> block_owners; // index: node id
  std::vector<node_agent_actor> node_agents;   // index: node id
  std::vector<prefill_worker_actor> prefill;   // index: prefill instance id
  std::vector<decode_worker_actor> decode;     // index: decode instance id
  std::vector<uint32_t> prefill_node;          // node of each prefill instance
  std::vector<uint32_t> decode_node;           // node of each decode instance
};

} // namespace crescent
