// The directory of a hosted node: what its workers need of the rest of the cluster, sent by
// the main process once every node has joined and again after each rejoin (see node_agent.hpp).
#include "actors/node_agent/node_agent_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/cluster.capnp.h"
#include "transport/peer_wire.hpp"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>

#include <algorithm>

namespace crescent {

namespace {

struct directory_terms {
  std::vector<transport::peer_info> peers;
  uint32_t decode;
};

caf::expected<directory_terms> read_directory(const typed_envelope<wire::ClusterDirectory>& msg) {
  return read_as<wire::ClusterDirectory>(
      msg, [](wire::ClusterDirectory::Reader in) -> caf::expected<directory_terms> {
        if (in.getPeers().size() > transport::peer_nodes_max)
          return make_error(errc::limit_exceeded, "more processes than a cluster has nodes");
        directory_terms out{{}, in.getDecodeInstances()};
        for (auto p : in.getPeers()) {
          auto peer = transport::from_wire(p);
          if (!peer)
            return std::move(peer.error());
          out.peers.push_back(std::move(*peer));
        }
        return out;
      });
}

} // namespace

caf::result<void> on_directory(node_agent_ptr self,
                               const typed_envelope<wire::ClusterDirectory>& msg,
                               const std::vector<caf::actor>& decode,
                               const std::vector<caf::actor>& prefill) {
  auto& st = self->state;
  if (!st.hosted || !st.joined)
    return st.bad.refuse(
        st.name, make_error(errc::invalid_argument, "a node takes the directory after its join"));
  // Only the process that joined this node may tell it the cluster.
  if (!self->current_sender() || self->current_sender()->node() != st.conductor.node())
    return st.bad.refuse(
        st.name, make_error(errc::access_denied, "the directory comes from the cluster's process"));
  auto terms = read_directory(msg);
  if (!terms)
    return st.bad.refuse(st.name, std::move(terms.error()));
  auto& h = *st.hosted;
  if (decode.size() != terms->decode || terms->decode != h.cluster_decode_instances ||
      std::any_of(decode.begin(), decode.end(), [](const caf::actor& a) { return !a; }))
    return st.bad.refuse(
        st.name, make_error(errc::invalid_argument, "the directory's decode workers are missing"));
  if (prefill.size() != h.cluster_prefill_instances ||
      std::any_of(prefill.begin(), prefill.end(), [](const caf::actor& a) { return !a; }))
    return st.bad.refuse(
        st.name, make_error(errc::invalid_argument, "the directory's prefill workers are missing"));
  for (size_t k = 0; k < h.prefill.size(); ++k)
    if (prefill[h.first_prefill_instance + k] != caf::actor_cast<caf::actor>(h.prefill[k]))
      return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                               "the directory misplaces this node's prefill "
                                               "workers"));
  // This node's own decode workers must be where the directory says they are.
  for (size_t k = 0; k < h.decode.size(); ++k)
    if (decode[h.first_decode_instance + k] != caf::actor_cast<caf::actor>(h.decode[k]))
      return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                               "the directory misplaces this node's decode "
                                               "workers"));
  for (const auto& p : terms->peers) {
    // This process's own description comes back with the others'. A process already known
    // keeps its connections; a node's new process (a rejoin) replaces its old one's.
    if (std::find(p.nodes.begin(), p.nodes.end(), h.node) != p.nodes.end())
      continue;
    if (auto err = h.transfer->add_peer(p))
      return st.bad.refuse(st.name, std::move(err));
  }
  // Published before any request that needs it: bring-up (or the rejoin) starts requests only
  // once this reply is in.
  if (auto err = h.dir->update([&](directory& d) {
        d.decode.clear();
        d.prefill.clear();
        for (const auto& a : decode)
          d.decode.push_back(caf::actor_cast<decode_worker_actor>(a));
        for (const auto& a : prefill)
          d.prefill.push_back(caf::actor_cast<prefill_worker_actor>(a));
      }))
    return st.bad.refuse(st.name, std::move(err));
  ++st.directories;
  return caf::unit;
}

} // namespace crescent
