// Whether an HTTP client is still there while its answer is being computed. cpp-httplib gives a
// handler no access to its connection's socket, so it is found once by its addresses (the
// request's REMOTE_ADDR/REMOTE_PORT and LOCAL_PORT) among this process's descriptors, and then
// looked at without reading from it. Linux only (/proc/self/fd).
#pragma once

#include <cstdint>
#include <string>

namespace crescent::serve {

struct connection_addresses {
  std::string remote_addr; // as the request gives it: "127.0.0.1", "::1"
  uint16_t remote_port = 0;
  uint16_t local_port = 0;
};

/// The descriptor of the TCP connection with these addresses; -1 when none is found.
int find_connection_socket(const connection_addresses& c);

/// True when the peer has closed the connection (or it broke). Reads nothing: bytes the client
/// sent after its request (a pipelined next request) stay for the server.
bool peer_gone(int fd);

} // namespace crescent::serve
