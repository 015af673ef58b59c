#include "apps/bench/peer_client.hpp"

#include "actors/common/remote_connect.hpp"
#include "actors/common/reply_type.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/bench.capnp.h"
#include "transport/peer_wire.hpp"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <cstdio>

namespace crescent::bench {

namespace {

constexpr auto answer_timeout = std::chrono::seconds(10);

template <class... Ts>
caf::expected<reply_t<transfer_peer_actor, Ts...>> ask(caf::actor_system& sys,
                                                       const transfer_peer_actor& peer, Ts... xs) {
  using reply = reply_t<transfer_peer_actor, Ts...>;
  caf::scoped_actor self{sys};
  caf::expected<reply> result{make_error(errc::timeout, "no answer")};
  self->request(peer, answer_timeout, xs...)
      .receive([&](reply& e) { result = std::move(e); },
               [&](caf::error& err) { result = std::move(err); });
  return result;
}

// A region handle the peer answers `atom` with.
template <class Atom>
caf::expected<transport::region_handle> ask_region(caf::actor_system& sys,
                                                   const transfer_peer_actor& peer, Atom atom) {
  auto handle = ask(sys, peer, atom);
  if (!handle)
    return std::move(handle.error());
  return read_as<wire::RegionHandle>(
      *handle, [](wire::RegionHandle::Reader in) { return transport::from_wire(in); });
}

} // namespace

caf::expected<remote_peer> start_transfer_peer(caf::actor_system& sys,
                                               const std::string& executable,
                                               const transfer_peer_options& opt) {
  std::vector<std::string> args{"transfer-peer", "--node", std::to_string(opt.node), "--region-mib",
                                std::to_string(opt.region_mib)};
  if (!opt.shm)
    args.push_back("--no-shm");
  if (!opt.tcp)
    args.push_back("--no-tcp");
  if (opt.gpu_mib > 0) {
    args.push_back("--gpu-mib");
    args.push_back(std::to_string(opt.gpu_mib));
  }
  if (!opt.cpus.empty()) {
    args.push_back("--cpus");
    args.push_back(opt.cpus);
  }
  auto child = child_process::spawn(executable, args);
  if (!child)
    return std::move(child.error());
  auto line = child->read_line(std::chrono::seconds(30));
  if (!line)
    return std::move(line.error());
  unsigned actor_port = 0, sink_port = 0;
  int pid = 0;
  const auto cpus_at = line->find(" cpus="); // the last field: a CPU list can be long
  if (std::sscanf(line->c_str(), "crescent-transfer-peer actor-port=%u sink-port=%u pid=%d",
                  &actor_port, &sink_port, &pid) != 3 ||
      cpus_at == std::string::npos)
    return make_error(errc::io_error, "unexpected transfer peer greeting: " + *line);
  auto cpus = line->substr(cpus_at + 6);
  auto actor =
      remote_actor_of<transfer_peer_actor>(sys, "127.0.0.1", static_cast<uint16_t>(actor_port));
  if (!actor)
    return make_error(errc::unavailable,
                      "cannot reach the transfer peer's actor: " + sys.render(actor.error()));
  remote_peer peer{std::move(*child), *actor, {}, {}, static_cast<uint16_t>(sink_port), cpus};
  auto info = ask(sys, peer.actor, peer_atom::value);
  if (!info)
    return std::move(info.error());
  auto decoded = read_as<wire::TransportPeer>(
      *info, [](wire::TransportPeer::Reader in) { return transport::from_wire(in); });
  if (!decoded)
    return std::move(decoded.error());
  peer.info = *decoded;
  auto region = ask_region(sys, peer.actor, region_atom::value);
  if (!region)
    return std::move(region.error());
  peer.region = *region;
  peer.gpu_region = ask_region(sys, peer.actor, gpu_region_atom::value);
  return peer;
}

caf::expected<uint64_t> remote_digest(caf::actor_system& sys, const transfer_peer_actor& peer,
                                      uint64_t offset, uint64_t length) {
  auto range = make_envelope<wire::ByteRange>([&](wire::ByteRange::Builder out) {
    out.setOffset(offset);
    out.setLength(length);
  });
  auto reply = ask(sys, peer, digest_atom::value, range);
  if (!reply)
    return std::move(reply.error());
  return read_as<wire::Digest>(*reply, [](wire::Digest::Reader in) { return in.getXxh3(); });
}

} // namespace crescent::bench
