// A TCP server on loopback whose accept queue is full: it listens with a backlog of 0 and one
// connection already waits in it, so the kernel drops further handshakes and connects to it
// hang (until their timeout, or the server's end). What a dark host looks like, on loopback.
#pragma once

#include "transport/tcp/socket_io.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>

namespace crescent::transport {

class unaccepting_server {
 public:
  unaccepting_server() {
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    EXPECT_EQ(listen(listen_fd_, 0), 0);
    EXPECT_EQ(getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len), 0);
    port_ = ntohs(addr.sin_port);
    filler_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    EXPECT_EQ(connect(filler_fd_, reinterpret_cast<sockaddr*>(&addr), len), 0);
    // What the tests stand on: a connect here does not complete.
    auto probe = tcp::connect_to("127.0.0.1", port_, std::chrono::milliseconds(100));
    hangs_ = !probe;
    if (probe)
      close(*probe);
  }
  ~unaccepting_server() {
    close(filler_fd_);
    close(listen_fd_);
  }
  unaccepting_server(const unaccepting_server&) = delete;
  unaccepting_server& operator=(const unaccepting_server&) = delete;

  uint16_t port() const { return port_; }
  /// Whether a connect to it hung (for 100 ms) when it was made.
  bool connects_hang() const { return hangs_; }

 private:
  int listen_fd_ = -1;
  int filler_fd_ = -1;
  uint16_t port_ = 0;
  bool hangs_ = false;
};

} // namespace crescent::transport
