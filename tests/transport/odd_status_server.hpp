// A data-plane server on loopback that answers every request, on every connection it accepts,
// with one fixed status and no message: what a peer that does not speak the protocol (or lies)
// looks like to an initiator.
#pragma once

#include "loopback_server.hpp"
#include "transport/tcp/tcp_protocol.hpp"

#include <vector>

namespace crescent::transport {

class odd_status_server {
 public:
  explicit odd_status_server(uint8_t status)
      : server_([status](int fd, uint64_t) { serve(fd, status); }) {}

  uint16_t port() const { return server_.port(); }
  int connections() const { return server_.connections(); }

 private:
  static void serve(int fd, uint8_t status) {
    for (;;) {
      tcp::request_header req;
      if (tcp::read_full(fd, &req, sizeof(req)))
        return;
      const bool carries = req.kind == tcp::kind_write || req.kind == tcp::kind_connect ||
                           req.kind == tcp::kind_release;
      std::vector<std::byte> payload(carries && req.length <= (1u << 24) ? req.length : 0);
      if (tcp::read_full(fd, payload.data(), payload.size()))
        return;
      tcp::response_header res;
      res.request_id = req.request_id;
      res.status = status;
      iovec iov{&res, sizeof(res)};
      if (tcp::write_all(fd, &iov, 1))
        return;
    }
  }

  loopback_server server_;
};

} // namespace crescent::transport
