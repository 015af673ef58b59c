// Loopback ports nobody listens on, for tests that start servers on ports they must name
// (a cluster file's addresses, a Prometheus configuration).
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

namespace crescent::testing {

/// `n` distinct ports nobody listens on (bound together, then released).
inline std::vector<uint16_t> unused_ports(size_t n) {
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (size_t i = 0; i < n; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
    fds.push_back(fd);
    ports.push_back(ntohs(a.sin_port));
  }
  for (int fd : fds)
    close(fd);
  return ports;
}

/// A port nobody listens on now.
inline uint16_t unused_port() {
  return unused_ports(1)[0];
}

} // namespace crescent::testing
