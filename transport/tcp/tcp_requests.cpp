// The data requests: writes and reads of registered regions, and the responses they get.
#include "transport/tcp/tcp_requests.hpp"

#include "messages/errors.hpp"
#include "messages/xxh3.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/trace_points.hpp"
#include "transport/transfer_types.hpp"

#include <array>
#include <cstring>
#include <string>

namespace crescent::transport::tcp::serving {

namespace {

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

// A response as it goes out: its header, then a refusal's message or a success's payload (for a
// read, from the region it pinned).
struct answer {
  response_header res;
  std::string message;
  const std::byte* payload = nullptr;
  bool pinned = false;
  region_handle handle;
};

// The held acknowledgements, then `answers` in order, with one send.
caf::error send_answers(int fd, ack_queue& acks, std::vector<answer>& answers) {
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
  if (!acks.empty())
    CRESCENT_TRACE(acks_sent, acks.size());
  auto sent = write_all(fd, iov.data(), static_cast<int>(iov.size()));
  acks.clear();
  return sent;
}

} // namespace

caf::error respond(int fd, ack_queue& acks, const request_header& req, const caf::error& err,
                   const std::byte* payload, uint64_t length, uint64_t checksum) {
  std::vector<answer> one(1);
  one[0].res = response_to(req, err, one[0].message, length, checksum);
  one[0].payload = payload;
  return send_answers(fd, acks, one);
}

caf::error flush(int fd, ack_queue& acks) {
  std::vector<answer> none;
  return send_answers(fd, acks, none);
}

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
  if (!err && (req.flags & flag_checksum) != 0 && xxh3_64(*target, req.length) != req.checksum)
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

namespace {

// Reads answered with one send: while the next request buffered is a read too (an initiator
// sends a batch's reads in bursts), up to reads_max of them or read_bytes_max of payload (but
// always the first).
constexpr size_t reads_max = 32;
constexpr uint64_t read_bytes_max = 4u << 20;

// Answers `req`, then takes the reads buffered behind it while they fit, pinning their sources:
// the caller unpins every answer marked pinned, whatever this returns.
caf::error gather_reads(region_table& table, stream_reader& in, request_header req,
                        std::vector<answer>& answers) {
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
      const uint64_t sum = (req.flags & flag_checksum) != 0 ? xxh3_64(*source, req.length) : 0;
      a.res = response_to(req, caf::none, a.message, req.length, sum);
      bytes += req.length;
    }
    if (answers.size() == reads_max)
      return caf::none;
    const auto* next = in.peek(sizeof(request_header));
    if (next == nullptr)
      return caf::none;
    std::memcpy(&req, next, sizeof(req));
    // Anything else is the main loop's, which checks it (and drops a connection that sent a
    // header it cannot trust).
    if (req.magic != request_magic || req.kind != kind_read || req.length > slice_bytes_max ||
        bytes + req.length > read_bytes_max)
      return caf::none;
    if (auto err = in.read(&req, sizeof(req)))
      return err; // rare: never, as the header is buffered
  }
}

} // namespace

caf::error serve_reads(region_table& table, stream_reader& in, int fd, ack_queue& acks,
                       request_header req) {
  std::vector<answer> answers;
  answers.reserve(reads_max);
  auto err = gather_reads(table, in, req, answers);
  if (!err)
    err = send_answers(fd, acks, answers);
  for (auto& a : answers)
    if (a.pinned)
      table.unpin(a.handle);
  return err;
}

} // namespace crescent::transport::tcp::serving
