// peer_info in Cap'n Proto form (wire::TransportPeer), with the checks a receiver needs: a
// peer description comes from another process and is validated like any other input.
#pragma once

#include "messages/schema/common.capnp.h"
#include "transport/transfer_types.hpp"

#include <caf/expected.hpp>

namespace crescent::transport {

inline constexpr size_t peer_nodes_max = 64;

void to_wire(const peer_info& p, wire::TransportPeer::Builder out);

/// Errors for an empty or oversized node list, oversized texts, a negative pid, or RDMA ports
/// that are too many or malformed (name, 16-byte GID, link layer, port number).
caf::expected<peer_info> from_wire(wire::TransportPeer::Reader in);

} // namespace crescent::transport
