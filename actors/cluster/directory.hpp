// Where every actor of a cluster is. Bring-up fills it once, before the first request, and
// actors only read it while handling messages; the mailbox hand-off of that first message
// orders the writes before the reads. Clusters that span processes fill it from membership.
#pragma once

#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/conductor/conductor_actor.hpp"
#include "actors/coupled_worker/coupled_worker_actor.hpp"
#include "actors/decode_worker/decode_worker_actor.hpp"
#include "actors/node_agent/node_agent_actor.hpp"
#include "actors/prefill_worker/prefill_worker_actor.hpp"
#include "actors/store_master/store_master_actor.hpp"

#include <caf/actor.hpp>
#include <caf/actor_cast.hpp>

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
  // A coupled cluster's instances (no prefill or decode ones then): the conductor numbers them
  // as prefill and decode instances alike, index i being coupled instance i.
  std::vector<coupled_worker_actor> coupled;
  std::vector<uint32_t> coupled_node;
};

/// Handles as they travel between processes (caf::actor needs no type registration), and back.
template <class Handle>
std::vector<caf::actor> untyped(const std::vector<Handle>& handles) {
  std::vector<caf::actor> out;
  out.reserve(handles.size());
  for (const auto& h : handles)
    out.push_back(caf::actor_cast<caf::actor>(h));
  return out;
}

/// Stores `handles` as `Handle`s into `out` from index `first` on.
template <class Handle>
void place_typed(const std::vector<caf::actor>& handles, std::vector<Handle>& out, size_t first) {
  for (size_t k = 0; k < handles.size(); ++k)
    out[first + k] = caf::actor_cast<Handle>(handles[k]);
}

} // namespace crescent
