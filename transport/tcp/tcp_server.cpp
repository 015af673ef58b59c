#include "transport/tcp/tcp_server.hpp"

#include "messages/errors.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/stream_reader.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/tcp/tcp_requests.hpp"
#include "transport/thread_name.hpp"
#include "transport/trace_points.hpp"
#include "transport/transfer_types.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace crescent::transport::tcp {

namespace {

bool known_kind(uint8_t kind) {
  return kind == kind_read || kind == kind_write || kind == kind_describe || kind == kind_connect ||
         kind == kind_release;
}

} // namespace

caf::expected<std::unique_ptr<server>> server::start(region_table& table, const std::string& host,
                                                     uint16_t port,
                                                     std::chrono::milliseconds silence_max,
                                                     rdma::responder* rdma) {
  auto listening = listen_on(host, port);
  if (!listening)
    return std::move(listening.error());
  std::unique_ptr<server> s{new server(table, silence_max, rdma)};
  s->listen_fd_ = listening->first;
  s->port_ = listening->second;
  s->wake_fd_ = eventfd(0, EFD_CLOEXEC);
  s->acceptor_ = named_thread("tcp-accept", [p = s.get()] { p->accept_loop(); });
  return s;
}

server::~server() {
  stop();
}

void server::stop() {
  if (stopping_.exchange(true))
    return;
  uint64_t one = 1;
  [[maybe_unused]] auto n = ::write(wake_fd_, &one, sizeof(one));
  if (acceptor_.joinable())
    acceptor_.join();
  std::lock_guard guard{mutex_};
  for (auto& c : connections_)
    shutdown(c.fd, SHUT_RDWR);
  for (auto& c : connections_) {
    c.thread.join();
    close(c.fd);
  }
  connections_.clear();
  close(listen_fd_);
  close(wake_fd_);
}

void server::reap() {
  for (auto i = connections_.begin(); i != connections_.end();) {
    if (!i->finished.load()) {
      ++i;
      continue;
    }
    i->thread.join();
    close(i->fd);
    i = connections_.erase(i);
  }
}

void server::accept_loop() {
  while (!stopping_.load()) {
    pollfd fds[2] = {{listen_fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 || (fds[1].revents & POLLIN) != 0)
      continue;
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      continue;
    std::lock_guard guard{mutex_};
    reap();
    if (connections_.size() >= connections_max || stopping_.load()) {
      close(fd);
      continue;
    }
    set_receive_timeout(fd, silence_max_);
    // A reader that stops reading would otherwise hold the region of its read pinned (and
    // unregister_region waiting) for as long as it lives.
    set_send_timeout(fd, silence_max_);
    // Responses are small and must not wait for Nagle's algorithm to coalesce them.
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto& c = connections_.emplace_back();
    c.fd = fd;
    c.thread = named_thread("tcp-serve", [this, &c] { serve(c); });
  }
}

void server::serve(connection& c) {
  stream_reader in{c.fd};
  serving::ack_queue acks;
  acks.reserve(serving::acks_max);
  while (!stopping_.load()) {
    // Acknowledgements go out before this thread could wait for a request: the initiator may
    // be waiting for them.
    if (!acks.empty() && (acks.size() >= serving::acks_max || !in.has(sizeof(request_header))))
      if (serving::flush(c.fd, acks))
        break;
    request_header req;
    auto err = in.read(&req, sizeof(req), true);
    if (err && is(err, errc::timeout))
      continue; // idle
    CRESCENT_TRACE(request_read, req.length);
    if (err)
      break;
    // A header we cannot trust ends the connection: its payload length may be anything. (A
    // describe's length is the range to check, not a payload: any value is fine.)
    const bool payload = req.kind != kind_describe;
    if (req.magic != request_magic || !known_kind(req.kind) ||
        (payload && req.length > slice_bytes_max))
      break;
    // Before a payload that takes a while to arrive, the acknowledgements held for earlier
    // writes go: their batches need not wait for this one.
    if (!acks.empty() && req.kind == kind_write && req.length >= serving::ack_hold_payload_max)
      if (serving::flush(c.fd, acks))
        break;
    switch (req.kind) {
    case kind_write:
      err = serving::serve_write(table_, in, c.fd, acks, req);
      if (!err && !acks.empty() && (req.flags & flag_ack_now) != 0)
        err = serving::flush(c.fd, acks);
      break;
    case kind_read:
      err = serving::serve_reads(table_, in, c.fd, acks, req);
      break;
    case kind_describe:
      err = serving::serve_describe(table_, rdma_, c.fd, acks, req);
      break;
    case kind_connect:
      err = serving::serve_connect(table_, rdma_, in, c.fd, acks, req, &c);
      break;
    default:
      err = serving::serve_release(rdma_, in, c.fd, acks, req, &c);
      break;
    }
    if (err)
      break;
  }
  shutdown(c.fd, SHUT_RDWR);
  // The initiator's queue pairs connected through this connection die with it: their owner is
  // gone or reconnecting, and nothing else would ever destroy their partners here.
  if (rdma_ != nullptr)
    rdma_->release(&c);
  c.finished = true;
}

} // namespace crescent::transport::tcp
