// What the TCP-path tests that play a peer with a raw socket share: an initiator (node 2) that
// reaches node 1 only over TCP, through one connection, and the peer_info of such a peer.
#pragma once

#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

namespace crescent::transport {

/// Node 1 at 127.0.0.1:port, on "another host": no shared memory, TCP is the only path.
inline peer_info tcp_peer_at(uint16_t port) {
  peer_info p;
  p.nodes = {1};
  p.host_id = "another host";
  p.tcp_host = "127.0.0.1";
  p.tcp_port = port;
  return p;
}

/// An engine for node 2 with one TCP connection per peer, neither shm nor RDMA, that knows
/// node 1 at `port`.
inline std::shared_ptr<transfer_engine>
tcp_initiator(uint16_t port, std::chrono::milliseconds connect_timeout = std::chrono::seconds(2)) {
  transfer_options o;
  o.local_nodes = {2};
  o.enable_shm = false;
  o.enable_rdma = false;
  o.tcp_connections_per_peer = 1;
  o.connect_timeout = connect_timeout;
  auto engine = transfer_engine::create(o);
  EXPECT_TRUE(engine) << describe(engine.error());
  if (!engine)
    return nullptr;
  EXPECT_FALSE((*engine)->add_peer(tcp_peer_at(port)));
  return *engine;
}

} // namespace crescent::transport
