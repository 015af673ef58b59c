#include "transport/peer_wire.hpp"

#include "messages/errors.hpp"

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
}

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
  return p;
}

} // namespace crescent::transport
