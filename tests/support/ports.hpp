// Loopback ports nobody listens on, for tests that start servers on ports they must name
// (a cluster file's addresses, a Prometheus configuration).
//
// Chosen below the kernel's ephemeral range (net.ipv4.ip_local_port_range), never from it: a
// port the kernel handed out for bind(0) is free again once released, and until the test's
// server binds it (a node process starting, or started again after a kill) any outgoing
// connection of any process on the host may be given it as its local port. Tests run side by
// side with suites that open many connections, and a run of `crescent up` once failed at its
// start that way. Below the range only a process that names the port itself can take it.
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <random>
#include <vector>

namespace crescent::testing {

namespace ports_detail {

constexpr uint32_t lowest_port = 20000;
constexpr uint32_t span_min = 2000; // fewer free ports than this below the range: use bind(0)

/// The first port of the kernel's ephemeral range (32768 where it cannot be read).
inline uint32_t ephemeral_first() {
  std::ifstream in{"/proc/sys/net/ipv4/ip_local_port_range"};
  uint32_t first = 0, last = 0;
  if (in >> first >> last && first > 0)
    return first;
  return 32768;
}

/// A socket bound to `port` on loopback (0: any), or -1.
inline int bound(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

inline uint16_t port_of(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
  return ntohs(a.sin_port);
}

} // namespace ports_detail

/// `n` distinct ports nobody listens on (bound together, then released), below the ephemeral
/// range where it leaves room, else from it.
inline std::vector<uint16_t> unused_ports(size_t n) {
  using namespace ports_detail;
  const uint32_t high = std::min<uint32_t>(ephemeral_first(), 65536) - 1;
  // Seeded per process and call: test processes side by side draw different ports.
  static std::mt19937 rng(static_cast<uint32_t>(
      getpid() ^ std::chrono::steady_clock::now().time_since_epoch().count()));
  std::vector<int> fds;
  std::vector<uint16_t> ports;
  for (size_t tries = 0; ports.size() < n && tries < 64 * n; ++tries) {
    int fd = -1;
    if (high >= lowest_port + span_min)
      fd = bound(static_cast<uint16_t>(lowest_port + rng() % (high - lowest_port + 1)));
    else
      fd = bound(0);
    if (fd < 0)
      continue; // taken: draw again
    const uint16_t port = port_of(fd);
    if (std::find(ports.begin(), ports.end(), port) != ports.end()) {
      close(fd);
      continue;
    }
    fds.push_back(fd);
    ports.push_back(port);
  }
  EXPECT_EQ(ports.size(), n) << "no free loopback ports";
  for (int fd : fds)
    close(fd);
  return ports;
}

/// A port nobody listens on now.
inline uint16_t unused_port() {
  return unused_ports(1)[0];
}

} // namespace crescent::testing
