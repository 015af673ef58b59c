#include "transport/tcp/tcp_server.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_control.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/stream_reader.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/thread_name.hpp"
#include "transport/transfer_types.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <array>
#include <cstring>
#include <vector>

namespace crescent::transport::tcp {

namespace {

// Write acknowledgements wait here while more requests are already buffered, and leave with
// the next response, when the stream pauses, or right behind a write marked flag_ack_now (the
// last of its batch): one send for many writes of small slices.
constexpr size_t acks_max = 32;
constexpr uint64_t ack_hold_payload_max = 1u << 20; // acks wait for smaller payloads only
using ack_queue = std::vector<response_header>;

// The response to `req`: a refusal with its message (cut to message_bytes_max), or success
// announcing `length` payload bytes.
response_header response_to(const request_header& req, const caf::error& err, std::string& message,
                            uint64_t length = 0, uint64_t checksum = 0) {
  response_header res;
  res.request_id = req.request_id;
  if (err) {
    res.status =
        err.category() == error_category ? err.code() : static_cast<uint8_t>(errc::internal);
    message = describe(err);
    if (message.size() > message_bytes_max)
      message.resize(message_bytes_max);
    res.message_bytes = static_cast<uint16_t>(message.size());
  } else {
    res.length = length;
    res.checksum = checksum;
    res.flags = req.flags;
  }
  return res;
}

caf::error respond(int fd, ack_queue& acks, const request_header& req, const caf::error& err,
                   const std::byte* payload = nullptr, uint64_t length = 0, uint64_t checksum = 0) {
  std::string message;
  auto res = response_to(req, err, message, length, checksum);
  iovec iov[4] = {{acks.data(), acks.size() * sizeof(response_header)},
                  {&res, sizeof(res)},
                  {message.data(), message.size()},
                  {const_cast<std::byte*>(payload), static_cast<size_t>(length)}};
  auto sent = write_all(fd, iov, 4);
  acks.clear();
  return sent;
}

caf::error flush(int fd, ack_queue& acks) {
  iovec iov{acks.data(), acks.size() * sizeof(response_header)};
  auto sent = write_all(fd, &iov, 1);
  acks.clear();
  return sent;
}

// Reads and throws away a refused write's payload, so that the stream stays in step.
caf::error drain(stream_reader& in, uint64_t length) {
  std::array<char, 64 * 1024> sink;
  while (length > 0) {
    const size_t n = std::min<uint64_t>(length, sink.size());
    if (auto err = in.read(sink.data(), n))
      return err;
    length -= n;
  }
  return caf::none;
}

region_handle handle_of(const request_header& req) {
  return region_handle{0, req.region_id, req.handle_offset, req.handle_length, req.access_key};
}

caf::error serve_write(region_table& table, stream_reader& in, int fd, ack_queue& acks,
                       const request_header& req) {
  const auto h = handle_of(req);
  auto target = table.pin(h, req.offset, req.length);
  if (!target) {
    if (auto err = drain(in, req.length))
      return err;
    return respond(fd, acks, req, target.error());
  }
  auto err = in.read(*target, req.length);
  caf::error verdict;
  if (!err && (req.flags & flag_checksum) != 0 && XXH3_64bits(*target, req.length) != req.checksum)
    verdict = make_error(errc::checksum_mismatch, "write payload does not match its checksum");
  table.unpin(h);
  if (err)
    return err;
  if (verdict)
    return respond(fd, acks, req, verdict);
  response_header ack;
  ack.request_id = req.request_id;
  ack.flags = req.flags;
  acks.push_back(ack);
  return caf::none;
}

// Reads answered with one send: while the next request buffered is a read too (an initiator
// sends a batch's reads in bursts), up to reads_max of them or read_bytes_max of payload.
constexpr size_t reads_max = 32;
constexpr uint64_t read_bytes_max = 4u << 20;

struct read_answer {
  response_header res;
  std::string message;
  const std::byte* payload = nullptr;
  bool pinned = false;
  region_handle handle;
};

caf::error serve_reads(region_table& table, stream_reader& in, int fd, ack_queue& acks,
                       request_header req) {
  std::vector<read_answer> answers;
  answers.reserve(reads_max);
  uint64_t bytes = 0;
  for (;;) {
    auto& a = answers.emplace_back();
    a.handle = handle_of(req);
    auto source = table.pin(a.handle, req.offset, req.length);
    if (!source) {
      a.res = response_to(req, source.error(), a.message);
    } else {
      a.pinned = true;
      a.payload = *source;
      const uint64_t sum = (req.flags & flag_checksum) != 0 ? XXH3_64bits(*source, req.length) : 0;
      a.res = response_to(req, caf::none, a.message, req.length, sum);
      bytes += req.length;
    }
    if (answers.size() == reads_max || bytes >= read_bytes_max)
      break;
    const auto* next = in.peek(sizeof(request_header));
    if (next == nullptr)
      break;
    std::memcpy(&req, next, sizeof(req));
    if (req.magic != request_magic || req.kind != kind_read || req.length > slice_bytes_max)
      break; // the main loop takes it
    if (auto err = in.read(&req, sizeof(req)))
      return err; // never: it is buffered
  }
  std::vector<iovec> iov;
  iov.reserve(1 + 2 * answers.size());
  iov.push_back({acks.data(), acks.size() * sizeof(response_header)});
  for (auto& a : answers) {
    iov.push_back({&a.res, sizeof(a.res)});
    if (!a.message.empty())
      iov.push_back({a.message.data(), a.message.size()});
    else if (a.res.length > 0)
      iov.push_back({const_cast<std::byte*>(a.payload), static_cast<size_t>(a.res.length)});
  }
  auto sent = write_all(fd, iov.data(), static_cast<int>(iov.size()));
  acks.clear();
  for (auto& a : answers)
    if (a.pinned)
      table.unpin(a.handle);
  return sent;
}

// Where the region lies and its remote keys: what an RDMA initiator needs to address it. The
// handle is checked as for a read; the region stays pinned while its keys are read, so its
// registrations exist meanwhile.
caf::error serve_describe(region_table& table, rdma::responder* rdma, int fd, ack_queue& acks,
                          const request_header& req) {
  const auto h = handle_of(req);
  auto region = table.pin_region(h, req.offset, req.length);
  if (!region)
    return respond(fd, acks, req, region.error());
  std::vector<rdma::region_key> keys;
  if (rdma != nullptr)
    keys = rdma->keys_of(req.region_id);
  table.unpin(h);
  if (keys.size() > rdma_devices_max)
    keys.resize(rdma_devices_max);
  const auto reply =
      rdma::encode_describe_reply(reinterpret_cast<uintptr_t>(region->first), region->second, keys);
  return respond(fd, acks, req, caf::none, reply.data(), reply.size());
}

// A queue pair for the initiator's, on the device it names; it lives until released or until
// `owner` ends. Only a peer holding a handle of ours gets one: the handle in the header is
// checked as a describe of all of it would be, before anything is created.
caf::error serve_connect(region_table& table, rdma::responder* rdma, stream_reader& in, int fd,
                         ack_queue& acks, const request_header& req, const void* owner) {
  if (req.length != sizeof(rdma::connect_request)) {
    if (auto err = drain(in, req.length))
      return err;
    return respond(fd, acks, req, make_error(errc::invalid_argument, "malformed connect request"));
  }
  std::array<std::byte, sizeof(rdma::connect_request)> body;
  if (auto err = in.read(body.data(), body.size()))
    return err;
  const auto h = handle_of(req);
  auto region = table.pin_region(h, 0, h.length);
  if (!region)
    return respond(fd, acks, req, region.error());
  table.unpin(h);
  auto parsed = rdma::parse_connect_request(body);
  if (!parsed)
    return respond(fd, acks, req, parsed.error());
  if (rdma == nullptr)
    return respond(fd, acks, req, make_error(errc::unavailable, "this engine has no RDMA device"));
  auto local = rdma->accept(*parsed, owner);
  if (!local)
    return respond(fd, acks, req, local.error());
  // This connection now holds a NIC resource: should its initiator's host vanish without a
  // FIN, keepalive ends the connection, and with it the queue pairs it holds.
  rdma::enable_keepalive(fd);
  return respond(fd, acks, req, caf::none, reinterpret_cast<const std::byte*>(&*local),
                 sizeof(*local));
}

// Destroys a queue pair this connection connected (rdma_wire.hpp).
caf::error serve_release(rdma::responder* rdma, stream_reader& in, int fd, ack_queue& acks,
                         const request_header& req, const void* owner) {
  if (req.length != sizeof(rdma::release_request)) {
    if (auto err = drain(in, req.length))
      return err;
    return respond(fd, acks, req, make_error(errc::invalid_argument, "malformed release request"));
  }
  std::array<std::byte, sizeof(rdma::release_request)> body;
  if (auto err = in.read(body.data(), body.size()))
    return err;
  auto parsed = rdma::parse_release_request(body);
  if (!parsed)
    return respond(fd, acks, req, parsed.error());
  if (rdma == nullptr)
    return respond(fd, acks, req, make_error(errc::unavailable, "this engine has no RDMA device"));
  return respond(fd, acks, req, rdma->release_one(owner, *parsed));
}

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
  s->acceptor_ = std::thread([p = s.get()] {
    name_this_thread("tcp-accept");
    p->accept_loop();
  });
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
    c.thread = std::thread([this, &c] {
      name_this_thread("tcp-serve");
      serve(c);
    });
  }
}

void server::serve(connection& c) {
  stream_reader in{c.fd};
  ack_queue acks;
  acks.reserve(acks_max);
  while (!stopping_.load()) {
    // Acknowledgements go out before this thread could wait for a request: the initiator may
    // be waiting for them.
    if (!acks.empty() && (acks.size() >= acks_max || !in.has(sizeof(request_header))))
      if (flush(c.fd, acks))
        break;
    request_header req;
    auto err = in.read(&req, sizeof(req), true);
    if (err && is(err, errc::timeout))
      continue; // idle
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
    if (!acks.empty() && req.kind == kind_write && req.length >= ack_hold_payload_max)
      if (flush(c.fd, acks))
        break;
    switch (req.kind) {
    case kind_write:
      err = serve_write(table_, in, c.fd, acks, req);
      if (!err && !acks.empty() && (req.flags & flag_ack_now) != 0)
        err = flush(c.fd, acks);
      break;
    case kind_read:
      err = serve_reads(table_, in, c.fd, acks, req);
      break;
    case kind_describe:
      err = serve_describe(table_, rdma_, c.fd, acks, req);
      break;
    case kind_connect:
      err = serve_connect(table_, rdma_, in, c.fd, acks, req, &c);
      break;
    default:
      err = serve_release(rdma_, in, c.fd, acks, req, &c);
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
