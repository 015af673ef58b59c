// The TCP data-plane protocol. Every slice is one request with a small fixed header; a write
// carries its payload right after the header, a read's payload follows the response header.
// The receiver puts payload bytes straight into the target memory (a registered region on the
// server, the initiator's buffer on the client): no intermediate buffer beyond the socket.
//
// Byte order is the host's; the magic numbers make a peer of the other byte order fail at once.
//
// Three more kinds serve the RDMA path (rdma/rdma_wire.hpp): kind_describe is checked exactly
// like a read of [offset, offset + length) of the handle and answers with where the region
// lives and its remote keys; kind_connect carries a connect_request (length bytes), must come
// with a valid handle of the owner's (checked like a describe of all of it), and answers with
// the owner's queue pair; kind_release carries a release_request (length bytes) and destroys
// a queue pair that connection connected. Refusals are refusals, as for reads and writes.
#pragma once

#include "messages/errors.hpp"

#include <cstdint>
#include <optional>

namespace crescent::transport::tcp {

inline constexpr uint32_t request_magic = 0x31525443;  // "CTR1"
inline constexpr uint32_t response_magic = 0x32525443; // "CTR2"
inline constexpr uint8_t kind_read = 1;
inline constexpr uint8_t kind_write = 2;
inline constexpr uint8_t kind_describe = 3;
inline constexpr uint8_t kind_connect = 4;
inline constexpr uint8_t kind_release = 5;
inline constexpr uint8_t flag_checksum = 1;
// On a write: the server sends the acknowledgements it holds right after this one's, instead of
// waiting for a pause in the stream (the initiator's batch ends here).
inline constexpr uint8_t flag_ack_now = 2;
inline constexpr uint16_t message_bytes_max = 1024;

struct request_header {
  uint32_t magic = request_magic;
  uint8_t kind = 0;
  uint8_t flags = 0;
  uint16_t reserved = 0;
  uint64_t request_id = 0;
  uint64_t region_id = 0;
  uint64_t access_key = 0;
  uint64_t handle_offset = 0; // the handle as the initiator holds it: the server checks it
  uint64_t handle_length = 0;
  uint64_t offset = 0; // of this slice, into the handle
  uint64_t length = 0;
  uint64_t checksum = 0; // writes with flag_checksum: xxh3 of the payload
};

struct response_header {
  uint32_t magic = response_magic;
  uint8_t status = 0; // 0: done; else a crescent::errc, with a message following
  uint8_t flags = 0;
  uint16_t message_bytes = 0;
  uint64_t request_id = 0;
  uint64_t length = 0;   // payload bytes following (reads, describe, connect)
  uint64_t checksum = 0; // reads with flag_checksum: xxh3 of the payload
};

/// The refusal a response's status names, or nullopt for a status no data-plane server sends
/// (none, timeout and cancelled, which are the initiator's own verdicts, or no crescent::errc):
/// only a broken or hostile peer sends those, and its connection is not trusted after one.
/// Relies on errc::internal being the last code (messages/errors.hpp keeps it so).
inline std::optional<errc> refusal_of(uint8_t status) {
  if (status < static_cast<uint8_t>(errc::malformed_message) ||
      status > static_cast<uint8_t>(errc::internal))
    return std::nullopt;
  const auto code = static_cast<errc>(status);
  if (code == errc::timeout || code == errc::cancelled)
    return std::nullopt;
  return code;
}

static_assert(sizeof(request_header) == 72);
static_assert(sizeof(response_header) == 32);

} // namespace crescent::transport::tcp
