#include "transport/peer_wire.hpp"

#include "messages/errors.hpp"

#include <algorithm>

namespace crescent::transport {

void to_wire(const peer_info& p, wire::TransportPeer::Builder out) {
  auto nodes = out.initNodes(static_cast<unsigned>(p.nodes.size()));
  for (unsigned i = 0; i < p.nodes.size(); ++i)
    nodes.set(i, p.nodes[i]);
  out.setHostId(p.host_id);
  out.setPid(p.pid);
  out.setTcpHost(p.tcp_host);
  out.setTcpPort(p.tcp_port);
  out.setTableFd(p.table_fd);
  out.setTableBytes(p.table_bytes);
  auto ports = out.initRdmaPorts(static_cast<unsigned>(p.rdma_ports.size()));
  for (unsigned i = 0; i < p.rdma_ports.size(); ++i) {
    const auto& r = p.rdma_ports[i];
    ports[i].setDevice(r.device);
    ports[i].setPort(r.port);
    ports[i].setLinkLayer(r.link_layer);
    ports[i].setLid(r.lid);
    ports[i].setGid(kj::arrayPtr(reinterpret_cast<const kj::byte*>(r.gid.data()), r.gid.size()));
  }
}

namespace {

caf::expected<std::vector<rdma_port_info>>
rdma_ports_from_wire(capnp::List<wire::TransportPeer::RdmaPort>::Reader in) {
  if (in.size() > rdma_devices_max)
    return make_error(errc::limit_exceeded, "a peer advertises at most 16 RDMA ports");
  std::vector<rdma_port_info> out;
  for (auto r : in) {
    if (r.getDevice().size() == 0 || r.getDevice().size() > rdma_device_name_max)
      return make_error(errc::invalid_argument, "RDMA device names have 1 to 63 bytes");
    if (r.getGid().size() != 16)
      return make_error(errc::invalid_argument, "an RDMA GID has 16 bytes");
    if (r.getLinkLayer() != 1 && r.getLinkLayer() != 2)
      return make_error(errc::invalid_argument, "unknown RDMA link layer");
    if (r.getPort() == 0)
      return make_error(errc::invalid_argument, "RDMA port numbers start at 1");
    rdma_port_info p;
    p.device = r.getDevice();
    p.port = r.getPort();
    p.link_layer = r.getLinkLayer();
    p.lid = r.getLid();
    std::copy(r.getGid().begin(), r.getGid().end(), p.gid.begin());
    out.push_back(std::move(p));
  }
  return out;
}

} // namespace

caf::expected<peer_info> from_wire(wire::TransportPeer::Reader in) {
  constexpr size_t text_max = 256;
  auto nodes = in.getNodes();
  if (nodes.size() == 0 || nodes.size() > peer_nodes_max)
    return make_error(errc::invalid_argument, "a peer serves 1 to 64 nodes");
  if (in.getHostId().size() > text_max || in.getTcpHost().size() > text_max)
    return make_error(errc::limit_exceeded, "peer host id or address above 256 bytes");
  if (in.getPid() <= 0)
    return make_error(errc::invalid_argument, "peer pid must be positive");
  peer_info p;
  for (auto n : nodes)
    p.nodes.push_back(n);
  p.host_id = in.getHostId();
  p.pid = in.getPid();
  p.tcp_host = in.getTcpHost();
  p.tcp_port = in.getTcpPort();
  p.table_fd = in.getTableFd();
  p.table_bytes = in.getTableBytes();
  auto ports = rdma_ports_from_wire(in.getRdmaPorts());
  if (!ports)
    return std::move(ports.error());
  p.rdma_ports = std::move(*ports);
  return p;
}

} // namespace crescent::transport
