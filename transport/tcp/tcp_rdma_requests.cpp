// The RDMA path's requests on the TCP data plane (rdma/rdma_wire.hpp): describe a region,
// connect a queue pair, release one.
#include "messages/errors.hpp"
#include "transport/rdma/rdma_control.hpp"
#include "transport/tcp/tcp_requests.hpp"
#include "transport/transfer_types.hpp"

#include <array>

namespace crescent::transport::tcp::serving {

// Where the region (or grant) lies and its remote keys: what an RDMA initiator needs to address
// it. The handle is checked as for a read; the region stays pinned while its keys are read, so its
// registrations exist meanwhile.
caf::error serve_describe(region_table& table, rdma::responder* rdma, int fd, ack_queue& acks,
                          const request_header& req) {
  const auto h = handle_of(req);
  auto region = table.pin_region(h, req.offset, req.length);
  if (!region)
    return respond(fd, acks, req, region.error());
  // A grant's bytes lie in its region's memory registration: the region's keys reach them.
  std::vector<rdma::region_key> keys;
  if (rdma != nullptr)
    keys = rdma->keys_of(table.registered_id(h));
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

} // namespace crescent::transport::tcp::serving
