#include "apps/serve/client_socket.hpp"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace crescent::serve {

namespace {

std::string address_of(const sockaddr_storage& a, uint16_t& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    inet_ntop(AF_INET, &v4.sin_addr, text, sizeof(text));
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    inet_ntop(AF_INET6, &v6.sin6_addr, text, sizeof(text));
    port = ntohs(v6.sin6_port);
  } else {
    port = 0;
  }
  return text;
}

bool matches(int fd, const connection_addresses& c) {
  sockaddr_storage peer{}, local{};
  socklen_t peer_len = sizeof(peer), local_len = sizeof(local);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len) != 0)
    return false;
  uint16_t peer_port = 0, local_port = 0;
  const auto peer_addr = address_of(peer, peer_port);
  address_of(local, local_port);
  return peer_port == c.remote_port && local_port == c.local_port && peer_addr == c.remote_addr;
}

} // namespace

int find_connection_socket(const connection_addresses& c) {
  if (c.remote_port == 0)
    return -1;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr)
    return -1;
  int found = -1;
  while (auto* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(d))
      continue;
    struct stat st {};
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode))
      continue;
    if (matches(static_cast<int>(fd), c)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(d);
  return found;
}

bool peer_gone(int fd) {
  if (fd < 0)
    return false;
  pollfd p{fd, POLLIN | POLLRDHUP, 0};
  if (poll(&p, 1, 0) <= 0)
    return false;
  if ((p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) != 0)
    return true;
  char byte = 0;
  // Readable: either data (the client is there) or the end of the stream (it is gone).
  return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

} // namespace crescent::serve
