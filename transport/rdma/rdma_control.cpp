#include "transport/rdma/rdma_control.hpp"

#include "messages/errors.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_protocol.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace crescent::transport::rdma {

control_channel::control_channel(std::string host, uint16_t port, uint32_t node,
                                 std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), node_(node), timeout_(timeout) {}

control_channel::~control_channel() {
  close();
}

int control_channel::fd() const {
  std::lock_guard guard{mutex_};
  return fd_;
}

uint64_t control_channel::generation() const {
  std::lock_guard guard{mutex_};
  return generation_;
}

void control_channel::close() {
  std::lock_guard guard{mutex_};
  if (fd_ < 0)
    return;
  ::close(fd_);
  fd_ = -1;
  ++generation_;
}

void control_channel::interrupt() {
  std::lock_guard guard{mutex_};
  abandoned_ = true;
  if (fd_ >= 0)
    shutdown(fd_, SHUT_RDWR);
}

caf::error control_channel::interrupted() const {
  return make_error(errc::unavailable, "the RDMA control connection to node " +
                                           std::to_string(node_) + " was interrupted");
}

caf::error control_channel::lost(const std::string& why) {
  close();
  return make_error(errc::io_error, "RDMA control connection to node " + std::to_string(node_) +
                                        " (" + host_ + ":" + std::to_string(port_) +
                                        ") lost: " + why);
}

void enable_keepalive(int fd) {
  // Best effort: a socket that refuses these still works, it only notices a dead peer later.
  int on = 1;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &keepalive_idle_s, sizeof(keepalive_idle_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &keepalive_interval_s, sizeof(keepalive_interval_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &keepalive_probes, sizeof(keepalive_probes));
}

// One request and its reply. `h`: the handle the request is about (describe) or that vouches
// for it (connect); `length`: the header's length field (a describe's range, else the
// payload's size).
caf::expected<std::vector<std::byte>>
control_channel::exchange(uint8_t kind, const region_handle* h, uint64_t length,
                          const void* payload, uint64_t payload_bytes, uint64_t reply_max) {
  if (abandoned_.load())
    return interrupted();
  int fd = this->fd();
  if (fd < 0) {
    auto opened = tcp::connect_to(host_, port_, timeout_, &abandoned_);
    if (!opened)
      return make_error(errc::unavailable, "node " + std::to_string(node_) + ": " +
                                               crescent::describe(opened.error()));
    // A reply slower than this means a peer that stopped answering.
    tcp::set_receive_timeout(*opened, timeout_);
    // Between requests nothing is read: keepalive notices a peer whose host went away.
    enable_keepalive(*opened);
    std::lock_guard guard{mutex_};
    if (abandoned_.load()) { // interrupted between the connect and here
      ::close(*opened);
      return interrupted();
    }
    fd = fd_ = *opened;
  }
  tcp::request_header req;
  req.kind = kind;
  req.request_id = next_request_++;
  if (h != nullptr) {
    req.region_id = h->region_id;
    req.access_key = h->access_key;
    req.handle_offset = h->offset;
    req.handle_length = h->length;
  }
  req.offset = 0;
  req.length = length;
  iovec iov[2] = {{&req, sizeof(req)}, {const_cast<void*>(payload), payload_bytes}};
  if (auto err = tcp::write_all(fd, iov, payload_bytes > 0 ? 2 : 1))
    return lost(crescent::describe(err));
  tcp::response_header res;
  if (auto err = tcp::read_full(fd, &res, sizeof(res)))
    return lost(crescent::describe(err));
  if (res.magic != tcp::response_magic || res.request_id != req.request_id)
    return lost("a reply that does not match the request");
  if (res.status != 0) {
    std::string message(res.message_bytes, '\0');
    if (auto err = tcp::read_full(fd, message.data(), message.size()))
      return lost(crescent::describe(err));
    const auto refusal = tcp::refusal_of(res.status);
    if (!refusal)
      return lost("a reply with status " + std::to_string(res.status) + ", not a refusal");
    return make_error(*refusal, "node " + std::to_string(node_) + " refused: " + message);
  }
  if (res.length > reply_max)
    return lost("a reply of " + std::to_string(res.length) + " bytes");
  std::vector<std::byte> reply(res.length);
  if (auto err = tcp::read_full(fd, reply.data(), reply.size()))
    return lost(crescent::describe(err));
  return reply;
}

caf::expected<remote_region> control_channel::describe(const region_handle& h) {
  // All of the handle, as a read of it would be checked.
  auto reply = exchange(tcp::kind_describe, &h, h.length, nullptr, 0, describe_reply_bytes_max);
  if (!reply)
    return std::move(reply.error());
  auto region = parse_describe_reply(*reply);
  if (!region) {
    close(); // a peer that speaks nonsense is not trusted with the queue pairs either
    return std::move(region.error());
  }
  region->region_id = h.region_id;
  region->access_key = h.access_key;
  return region;
}

caf::expected<qp_endpoint> control_channel::connect(const connect_request& req,
                                                    const region_handle& proof) {
  auto reply =
      exchange(tcp::kind_connect, &proof, sizeof(req), &req, sizeof(req), sizeof(qp_endpoint));
  if (!reply)
    return std::move(reply.error());
  if (reply->size() != sizeof(qp_endpoint))
    return lost("a connect reply of " + std::to_string(reply->size()) + " bytes");
  qp_endpoint e;
  std::memcpy(&e, reply->data(), sizeof(e));
  if (auto err = check_endpoint(e))
    return err;
  return e;
}

caf::error control_channel::release(const std::string& device, uint32_t qp_num,
                                    uint64_t generation) {
  if (this->generation() != generation || fd() < 0)
    return caf::none; // that connection is gone, and with it the owner's queue pair
  release_request req{};
  set_name(req.device, device);
  req.qp_num = qp_num;
  auto reply = exchange(tcp::kind_release, nullptr, sizeof(req), &req, sizeof(req), 0);
  if (!reply)
    return std::move(reply.error());
  return caf::none;
}

} // namespace crescent::transport::rdma
