// How the TCP data-plane server answers each kind of request (tcp_server.cpp reads them and
// dispatches): the data requests in tcp_requests.cpp, the RDMA path's in tcp_rdma_requests.cpp.
// Every function writes its response, or none and returns the error that ends the connection.
// Internal to the server.
#pragma once

#include "transport/rdma/rdma_responder.hpp"
#include "transport/region_table.hpp"
#include "transport/tcp/stream_reader.hpp"
#include "transport/tcp/tcp_protocol.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <vector>

namespace crescent::transport::tcp::serving {

// Write acknowledgements wait in an ack_queue while more requests are buffered, and leave with
// the next response, when the stream pauses, or right behind a write marked flag_ack_now (the
// last of its batch): one send for many writes of small slices.
constexpr size_t acks_max = 32;
constexpr uint64_t ack_hold_payload_max = 1u << 20; // acks wait for smaller payloads only
using ack_queue = std::vector<response_header>;

/// Sends the held acknowledgements, then the response to `req`: `err`'s refusal, or success
/// with `length` bytes of `payload`.
caf::error respond(int fd, ack_queue& acks, const request_header& req, const caf::error& err,
                   const std::byte* payload = nullptr, uint64_t length = 0, uint64_t checksum = 0);

/// Sends the held acknowledgements.
caf::error flush(int fd, ack_queue& acks);

/// Reads and throws away a refused request's payload, so that the stream stays in step.
caf::error drain(stream_reader& in, uint64_t length);

/// The handle a request names, as its initiator holds it.
region_handle handle_of(const request_header& req);

/// A write: its payload straight into the region, its acknowledgement held in `acks`.
caf::error serve_write(region_table& table, stream_reader& in, int fd, ack_queue& acks,
                       const request_header& req);

/// A read, and the reads buffered right behind it, answered with one send.
caf::error serve_reads(region_table& table, stream_reader& in, int fd, ack_queue& acks,
                       request_header req);

/// The RDMA path's requests (rdma/rdma_wire.hpp); `owner` is the connection that asked, whose
/// queue pairs live until it releases them or ends.
caf::error serve_describe(region_table& table, rdma::responder* rdma, int fd, ack_queue& acks,
                          const request_header& req);
caf::error serve_connect(region_table& table, rdma::responder* rdma, stream_reader& in, int fd,
                         ack_queue& acks, const request_header& req, const void* owner);
caf::error serve_release(rdma::responder* rdma, stream_reader& in, int fd, ack_queue& acks,
                         const request_header& req, const void* owner);

} // namespace crescent::transport::tcp::serving
