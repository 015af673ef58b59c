// What RDMA peers tell each other over the TCP data-plane protocol (tcp/tcp_protocol.hpp):
//
// - kind_describe: "where does this region live?" The owner checks the handle exactly as for a
//   read and answers with a describe_reply and its region_keys: the region's address in the
//   owner's process, its length and one remote key per device, the owner's preferred device
//   for that memory first.
// - kind_connect: "connect this queue pair of mine to one of yours." The payload is a
//   connect_request; the owner creates a queue pair on the named device, brings it to
//   ready-to-send and answers with its own qp_endpoint. The request header carries a handle of
//   one of the owner's regions, checked as a describe's is: only a peer that was given a handle
//   may have a queue pair created for it (each is a NIC resource, and the way in to the
//   owner's registered memory for whoever also holds a remote key). The owner's queue pair
//   lives until it is released or the TCP connection that asked for it ends, whichever comes
//   first; one connection holds a bounded number of them.
// - kind_release: "I no longer use this queue pair of yours." The payload is a release_request
//   naming the owner's device and queue pair (as its connect reply did); the owner destroys
//   it if that connection asked for it, and answers not_found otherwise. An initiator sends
//   it for each queue pair of its own that it drops or replaces while the connection lasts,
//   so that the owner does not hold dead queue pairs until the connection ends.
//
// Plain structs in host byte order, like the rest of the protocol (whose magic numbers make a
// peer of the other byte order fail at once). Everything read from a peer goes through the
// parse_ and check_ functions below before it is used.
#pragma once

#include "transport/transfer_types.hpp"

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace crescent::transport::rdma {

inline constexpr uint8_t link_infiniband = 1;     // = IBV_LINK_LAYER_INFINIBAND
inline constexpr uint8_t link_ethernet = 2;       // = IBV_LINK_LAYER_ETHERNET
inline constexpr uint8_t mtu_min = 1;             // IBV_MTU_256
inline constexpr uint8_t mtu_max = 5;             // IBV_MTU_4096
inline constexpr uint32_t qp_num_mask = 0xffffff; // queue pair numbers and PSNs have 24 bits
inline constexpr size_t name_bytes = rdma_device_name_max + 1;

/// One side of a reliable connection: what the other side's queue pair needs to reach it.
struct qp_endpoint {
  char device[name_bytes]; // NUL-terminated
  uint8_t gid[16];
  uint32_t qp_num;
  uint32_t psn; // the first packet sequence number it sends
  uint16_t lid;
  uint8_t port;
  uint8_t link_layer;
  uint8_t mtu;            // enum ibv_mtu: the active MTU of its port
  uint8_t rd_atomic_init; // RDMA READs it may have outstanding as requester (>= 1)
  uint8_t rd_atomic_dest; // RDMA READs it serves at once as responder (>= 1)
  uint8_t reserved[5];
};

struct connect_request {
  char target_device[name_bytes]; // the owner's device to connect through, NUL-terminated
  qp_endpoint initiator;
};

struct release_request {
  char device[name_bytes]; // the owner's device, NUL-terminated
  uint32_t qp_num;         // the owner's queue pair there, as its connect reply named it
  uint32_t reserved;
};

struct describe_reply {
  uint64_t base_address;  // of the region's first byte, in the owner's address space
  uint64_t region_length; // bytes
  uint32_t key_count;     // region_keys following, at most rdma_devices_max
  uint32_t reserved;
};

struct region_key {
  char device[name_bytes]; // NUL-terminated
  uint32_t rkey;
  uint32_t reserved;
};

static_assert(sizeof(qp_endpoint) == 100);
static_assert(sizeof(connect_request) == 164);
static_assert(sizeof(release_request) == 72);
static_assert(sizeof(describe_reply) == 24);
static_assert(sizeof(region_key) == 72);

inline constexpr uint64_t describe_reply_bytes_max =
    sizeof(describe_reply) + rdma_devices_max * sizeof(region_key);

/// A region as an initiator knows it once its owner described it.
struct remote_region {
  uint64_t region_id = 0;
  uint64_t access_key = 0; // the key the owner accepted
  uint64_t base_address = 0;
  uint64_t length = 0;
  std::vector<region_key> keys; // the owner's preferred device first
};

/// Copies a device name into a fixed field; asserts that it fits (names come from rdma-core or
/// validated options, never from a peer).
void set_name(char (&field)[name_bytes], const std::string& name);

/// The name in a field received from a peer: empty if it is not NUL-terminated or is empty.
std::string name_of(const char (&field)[name_bytes]);

/// Refuses an endpoint that no queue pair could be connected to: no device name, a queue pair
/// number or PSN beyond 24 bits, an unknown link layer or MTU, no LID on InfiniBand, a zero
/// GID on Ethernet, or no RDMA READ credits.
caf::error check_endpoint(const qp_endpoint& e);

/// A connect request as received: exactly sizeof(connect_request) bytes, checked.
caf::expected<connect_request> parse_connect_request(std::span<const std::byte> bytes);

/// A release request as received: exactly sizeof(release_request) bytes, naming a device and a
/// queue pair number a connect reply could have named (1..2^24-1).
caf::expected<release_request> parse_release_request(std::span<const std::byte> bytes);

std::vector<std::byte> encode_describe_reply(uint64_t base_address, uint64_t region_length,
                                             const std::vector<region_key>& keys);

/// A describe reply as received, checked: its size matches its key count, the count is within
/// the limit, every key names a device.
caf::expected<remote_region> parse_describe_reply(std::span<const std::byte> bytes);

} // namespace crescent::transport::rdma
