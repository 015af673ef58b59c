#include "transport/rdma/rdma_wire.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace crescent::transport::rdma {

void set_name(char (&field)[name_bytes], const std::string& name) {
  assert(name.size() < name_bytes && "device names are at most 63 bytes");
  std::memset(field, 0, name_bytes);
  std::memcpy(field, name.data(), std::min(name.size(), name_bytes - 1));
}

std::string name_of(const char (&field)[name_bytes]) {
  const char* end = static_cast<const char*>(std::memchr(field, '\0', name_bytes));
  if (end == nullptr)
    return {};
  return std::string(field, end);
}

caf::error check_endpoint(const qp_endpoint& e) {
  if (name_of(e.device).empty())
    return make_error(errc::invalid_argument, "queue pair endpoint without a device name");
  if (e.qp_num == 0 || e.qp_num > qp_num_mask || e.psn > qp_num_mask)
    return make_error(errc::invalid_argument, "queue pair number or PSN beyond 24 bits");
  if (e.link_layer != link_infiniband && e.link_layer != link_ethernet)
    return make_error(errc::invalid_argument, "unknown link layer " + std::to_string(e.link_layer));
  if (e.mtu < mtu_min || e.mtu > mtu_max)
    return make_error(errc::invalid_argument, "unknown MTU code " + std::to_string(e.mtu));
  if (e.port == 0)
    return make_error(errc::invalid_argument, "port numbers start at 1");
  if (e.link_layer == link_infiniband && e.lid == 0)
    return make_error(errc::invalid_argument, "an InfiniBand endpoint needs a LID");
  const bool zero_gid =
      std::all_of(std::begin(e.gid), std::end(e.gid), [](uint8_t b) { return b == 0; });
  if (e.link_layer == link_ethernet && zero_gid)
    return make_error(errc::invalid_argument, "a RoCE endpoint needs a GID");
  if (e.rd_atomic_init == 0 || e.rd_atomic_dest == 0)
    return make_error(errc::invalid_argument, "an endpoint that cannot take part in RDMA READ");
  return caf::none;
}

caf::expected<connect_request> parse_connect_request(std::span<const std::byte> bytes) {
  if (bytes.size() != sizeof(connect_request))
    return make_error(errc::invalid_argument, "a connect request has " +
                                                  std::to_string(sizeof(connect_request)) +
                                                  " bytes, not " + std::to_string(bytes.size()));
  connect_request req;
  std::memcpy(&req, bytes.data(), sizeof(req));
  if (name_of(req.target_device).empty())
    return make_error(errc::invalid_argument, "a connect request must name the target device");
  if (auto err = check_endpoint(req.initiator))
    return err;
  return req;
}

caf::expected<release_request> parse_release_request(std::span<const std::byte> bytes) {
  if (bytes.size() != sizeof(release_request))
    return make_error(errc::invalid_argument, "a release request has " +
                                                  std::to_string(sizeof(release_request)) +
                                                  " bytes, not " + std::to_string(bytes.size()));
  release_request req;
  std::memcpy(&req, bytes.data(), sizeof(req));
  if (name_of(req.device).empty())
    return make_error(errc::invalid_argument, "a release request must name the device");
  if (req.qp_num == 0 || req.qp_num > qp_num_mask)
    return make_error(errc::invalid_argument, "a release request must name a queue pair number "
                                              "of 24 bits");
  return req;
}

std::vector<std::byte> encode_describe_reply(uint64_t base_address, uint64_t region_length,
                                             const std::vector<region_key>& keys) {
  assert(keys.size() <= rdma_devices_max);
  describe_reply head{base_address, region_length, static_cast<uint32_t>(keys.size()), 0};
  std::vector<std::byte> out(sizeof(head) + keys.size() * sizeof(region_key));
  std::memcpy(out.data(), &head, sizeof(head));
  if (!keys.empty())
    std::memcpy(out.data() + sizeof(head), keys.data(), keys.size() * sizeof(region_key));
  return out;
}

caf::expected<remote_region> parse_describe_reply(std::span<const std::byte> bytes) {
  describe_reply head;
  if (bytes.size() < sizeof(head))
    return make_error(errc::io_error, "a describe reply shorter than its header");
  std::memcpy(&head, bytes.data(), sizeof(head));
  if (head.key_count > rdma_devices_max ||
      bytes.size() != sizeof(head) + head.key_count * sizeof(region_key))
    return make_error(errc::io_error, "a describe reply whose size does not match its keys");
  if (head.region_length == 0 || head.base_address == 0 ||
      head.region_length - 1 > UINT64_MAX - head.base_address)
    return make_error(errc::io_error, "a describe reply with an impossible region");
  remote_region out;
  out.base_address = head.base_address;
  out.length = head.region_length;
  out.keys.resize(head.key_count);
  if (head.key_count > 0)
    std::memcpy(out.keys.data(), bytes.data() + sizeof(head), head.key_count * sizeof(region_key));
  for (const auto& k : out.keys)
    if (name_of(k.device).empty())
      return make_error(errc::io_error, "a describe reply with a nameless device key");
  return out;
}

} // namespace crescent::transport::rdma
