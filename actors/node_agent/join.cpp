// The join of a hosted node by its cluster's main process (see node_agent.hpp).
#include "actors/node_agent/node_agent_state.hpp"
#include "actors/store_master/store_master_actor.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/cluster.capnp.h"
#include "messages/wire_version.hpp"
#include "transport/peer_wire.hpp"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

struct join_terms {
  uint32_t wire_version;
  uint32_t node;
  uint64_t fingerprint;
  uint64_t page_bytes;
  uint32_t first_decode;
  uint32_t decode;
  uint32_t first_prefill;
  uint32_t prefill;
  transport::peer_info peer;
};

caf::expected<join_terms> read_terms(const typed_envelope<wire::NodeJoin>& msg) {
  return read_as<wire::NodeJoin>(msg, [](wire::NodeJoin::Reader in) -> caf::expected<join_terms> {
    auto peer = transport::from_wire(in.getPeer());
    if (!peer)
      return std::move(peer.error());
    return join_terms{in.getWireVersion(),
                      in.getNode(),
                      in.getModelFingerprint(),
                      in.getPageBytes(),
                      in.getFirstDecodeInstance(),
                      in.getDecodeInstances(),
                      in.getFirstPrefillInstance(),
                      in.getPrefillInstances(),
                      std::move(*peer)};
  });
}

// Terms that differ mean the two processes read different cluster files: serving on would mix
// KV of different models or shapes, so the join is refused with what differs.
caf::error check_terms(const hosted_node& h, const join_terms& t) {
  auto differs = [&](const std::string& what, uint64_t theirs, uint64_t ours) {
    return make_error(errc::invalid_argument,
                      "the cluster's " + what + " is " + std::to_string(theirs) +
                          ", this node process has " + std::to_string(ours) +
                          ": start both from the same cluster file");
  };
  if (auto err = check_wire_version(t.wire_version, "the cluster's process", "this node process"))
    return err;
  if (t.node != h.node)
    return differs("node here", t.node, h.node);
  if (t.fingerprint != h.model_fingerprint)
    return differs("model fingerprint", t.fingerprint, h.model_fingerprint);
  if (t.page_bytes != h.page_bytes)
    return differs("KV page size", t.page_bytes, h.page_bytes);
  if (t.first_decode != h.first_decode_instance)
    return differs("first decode instance of this node", t.first_decode, h.first_decode_instance);
  if (t.decode != h.decode.size())
    return differs("decode instance count of this node", t.decode, h.decode.size());
  if (t.first_prefill != h.first_prefill_instance)
    return differs("first prefill instance of this node", t.first_prefill,
                   h.first_prefill_instance);
  if (t.prefill != h.prefill.size())
    return differs("prefill instance count of this node", t.prefill, h.prefill.size());
  return caf::none;
}

} // namespace

caf::result<typed_envelope<wire::NodeWelcome>, caf::actor, std::vector<caf::actor>,
            std::vector<caf::actor>>
on_join(node_agent_ptr self, const typed_envelope<wire::NodeJoin>& msg, caf::actor conductor,
        caf::actor master) {
  auto& st = self->state;
  if (!st.hosted)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "node " + std::to_string(st.node) +
                                                 " runs inside its cluster's process; only "
                                                 "nodes of `crescent node` processes are joined"));
  if (st.joined)
    return st.bad.refuse(
        st.name, make_error(errc::already_exists, "node " + std::to_string(st.node) +
                                                      " serves a cluster already; a node process "
                                                      "serves one cluster"));
  if (!conductor || !master)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "a join needs the conductor and the store master"));
  auto terms = read_terms(msg);
  if (!terms)
    return st.bad.refuse(st.name, std::move(terms.error()));
  auto& h = *st.hosted;
  if (auto err = check_terms(h, *terms))
    return st.bad.refuse(st.name, std::move(err));
  if (auto err = h.transfer->add_peer(terms->peer))
    return st.bad.refuse(st.name, std::move(err));
  if (auto err = h.dir->update([&](directory& d) {
        d.conductor = caf::actor_cast<conductor_actor>(conductor);
        d.store_master = caf::actor_cast<store_master_actor>(master);
      }))
    return st.bad.refuse(st.name, std::move(err));
  st.joined = true;
  st.conductor = caf::actor_cast<conductor_actor>(conductor);
  self->monitor(conductor);
  self->send(h.owner, join_atom::value, caf::actor_cast<store_master_actor>(master));
  spdlog::info("node_agent {}: joined by the cluster of process {} (data plane {}:{})", st.node,
               terms->peer.pid, terms->peer.tcp_host, terms->peer.tcp_port);
  auto welcome = make_envelope<wire::NodeWelcome>([&](wire::NodeWelcome::Builder out) {
    out.setNode(h.node);
    out.setDecodeInstances(static_cast<uint32_t>(h.decode.size()));
    out.setPrefillInstances(static_cast<uint32_t>(h.prefill.size()));
    out.setWireVersion(wire_version);
    transport::to_wire(h.transfer->self_info(), out.initPeer());
  });
  return {std::move(welcome), caf::actor_cast<caf::actor>(h.owner), untyped(h.decode),
          untyped(h.prefill)};
}

} // namespace crescent
