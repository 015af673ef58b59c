#include "transport/tcp/socket_io.hpp"

#include "messages/errors.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace crescent::transport::tcp {

namespace {

caf::error sys_error(const std::string& what) {
  return make_error(errc::io_error, what + ": " + std::strerror(errno));
}

caf::expected<sockaddr_in> resolve(const std::string& host, uint16_t port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) == 1)
    return addr;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || found == nullptr)
    return make_error(errc::unavailable, "cannot resolve host " + host);
  addr.sin_addr = reinterpret_cast<sockaddr_in*>(found->ai_addr)->sin_addr;
  freeaddrinfo(found);
  return addr;
}

} // namespace

caf::error receive_failure(ssize_t n, bool idle) {
  if (n == 0)
    return make_error(errc::io_error, "the peer closed the connection");
  if (errno == EINTR)
    return caf::none;
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    return idle ? make_error(errc::timeout, "idle")
                : make_error(errc::io_error, "the peer stalled in the middle of a message");
  return sys_error("receive");
}

caf::error read_full(int fd, void* buffer, size_t length, bool idle_ok) {
  auto* p = static_cast<char*>(buffer);
  size_t got = 0;
  while (got < length) {
    ssize_t n = recv(fd, p + got, length - got, MSG_WAITALL);
    if (n > 0)
      got += static_cast<size_t>(n);
    else if (auto err = receive_failure(n, idle_ok && got == 0))
      return err;
  }
  return caf::none;
}

caf::error write_all(int fd, iovec* iov, int count) {
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(count);
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        return make_error(errc::io_error, "send: the peer took no byte within the send timeout");
      return sys_error("send");
    }
    auto left = static_cast<size_t>(n);
    while (count > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --count;
    }
    if (count > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return caf::none;
}

caf::expected<uint64_t> send_now(int fd, std::span<const iovec> iov, uint64_t max_bytes) {
  std::vector<iovec> capped;
  for (const auto& v : iov) {
    if (max_bytes == 0)
      break;
    capped.push_back({v.iov_base, std::min<size_t>(v.iov_len, max_bytes)});
    max_bytes -= capped.back().iov_len;
  }
  if (capped.empty())
    return uint64_t{0};
  msghdr msg{};
  msg.msg_iov = capped.data();
  msg.msg_iovlen = capped.size();
  for (;;) {
    ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0)
      return static_cast<uint64_t>(n);
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return uint64_t{0};
    if (errno != EINTR)
      return sys_error("send");
  }
}

std::vector<std::byte> bytes_after(std::span<const iovec> iov, uint64_t skip) {
  std::vector<std::byte> rest;
  for (const auto& v : iov) {
    const auto* bytes = static_cast<const std::byte*>(v.iov_base);
    const uint64_t from = std::min<uint64_t>(skip, v.iov_len);
    rest.insert(rest.end(), bytes + from, bytes + v.iov_len);
    skip -= from;
  }
  return rest;
}

caf::expected<int> connect_to(const std::string& host, uint16_t port,
                              std::chrono::milliseconds timeout, const std::atomic<bool>* abandon) {
  auto addr = resolve(host, port);
  if (!addr)
    return std::move(addr.error());
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return sys_error("socket");
  const std::string where = host + ":" + std::to_string(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    if (errno != EINPROGRESS) {
      auto err =
          make_error(errc::unavailable, "cannot connect to " + where + ": " + std::strerror(errno));
      close(fd);
      return err;
    }
    // In steps, so that an abandoned attempt ends within one step rather than at the timeout.
    constexpr auto step = std::chrono::milliseconds(50);
    const auto until = std::chrono::steady_clock::now() + timeout;
    int ready = 0;
    for (auto left = timeout; ready == 0 && left.count() > 0;) {
      if (abandon != nullptr && abandon->load()) {
        close(fd);
        return make_error(errc::unavailable, "connecting to " + where + " was abandoned");
      }
      pollfd pfd{fd, POLLOUT, 0};
      ready = poll(&pfd, 1, static_cast<int>(std::min(left, step).count()));
      if (ready < 0 && errno == EINTR)
        ready = 0;
      left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (ready <= 0 || so_error != 0) {
      close(fd);
      return make_error(errc::unavailable,
                        "cannot connect to " + where + ": " +
                            (ready <= 0 ? std::string{"timed out"} : std::strerror(so_error)));
    }
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

caf::expected<std::pair<int, uint16_t>> listen_on(const std::string& host, uint16_t port) {
  auto addr = resolve(host, port);
  if (!addr)
    return std::move(addr.error());
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return sys_error("socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0 || listen(fd, 128) != 0) {
    auto err = sys_error("cannot listen on " + host + ":" + std::to_string(port));
    close(fd);
    return err;
  }
  sockaddr_in bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  return std::make_pair(fd, ntohs(bound.sin_port));
}

namespace {

void set_timeout(int fd, int option, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, option, &tv, sizeof(tv));
}

} // namespace

void set_receive_timeout(int fd, std::chrono::milliseconds timeout) {
  set_timeout(fd, SO_RCVTIMEO, timeout);
}

void set_send_timeout(int fd, std::chrono::milliseconds timeout) {
  set_timeout(fd, SO_SNDTIMEO, timeout);
}

} // namespace crescent::transport::tcp
