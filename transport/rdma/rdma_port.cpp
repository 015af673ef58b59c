// Port and GID choice of a device: the first active port; on InfiniBand its LID (queue pairs
// address peers in the same subnet by LID), on Ethernet a RoCE GID (RoCE addresses by GID, and
// v2 GIDs, carried in UDP/IP, are routable).
#include "messages/errors.hpp"
#include "transport/rdma/rdma_device.hpp"
#include "transport/rdma/rdma_topology.hpp"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>

namespace crescent::transport::rdma {

namespace {

// GID tables have 128 or 256 entries on current NICs; never look further.
constexpr int gid_table_scan_max = 256;

struct gid_entry {
  ibv_gid gid{};
  gid_type type = gid_type::roce_v1;
};

// The kernel states each GID's type in sysfs: the fallback where ibv_query_gid_ex is not
// supported (old kernels without the ioctl interface).
gid_type sysfs_gid_type(const std::string& device_name, uint8_t port, int index) {
  std::ifstream in{"/sys/class/infiniband/" + device_name + "/ports/" + std::to_string(port) +
                   "/gid_attrs/types/" + std::to_string(index)};
  std::string text;
  std::getline(in, text);
  return parse_gid_type(text);
}

// One GID table entry with its type; nothing for an empty or unreadable entry.
std::optional<gid_entry> read_gid(ibv_context* ctx, const std::string& device_name, uint8_t port,
                                  int index) {
  gid_entry out;
  ibv_gid_entry e{};
  const int rc = ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(index), &e, 0);
  if (rc == 0) {
    out.gid = e.gid;
    out.type = e.gid_type == IBV_GID_TYPE_ROCE_V2   ? gid_type::roce_v2
               : e.gid_type == IBV_GID_TYPE_ROCE_V1 ? gid_type::roce_v1
                                                    : gid_type::infiniband;
    return out;
  }
  if (rc != EOPNOTSUPP && rc != ENOSYS)
    return std::nullopt; // ENODATA: an empty entry
  if (ibv_query_gid(ctx, port, index, &out.gid) != 0)
    return std::nullopt;
  out.type = sysfs_gid_type(device_name, port, index);
  return out;
}

caf::expected<std::pair<int, ibv_gid>> choose_roce_gid(ibv_context* ctx, const std::string& name,
                                                       uint8_t port, int table_len,
                                                       int32_t wanted) {
  const std::string where = name + " port " + std::to_string(port);
  if (wanted >= 0) {
    auto e = wanted < table_len ? read_gid(ctx, name, port, wanted) : std::nullopt;
    if (!e || gid_rank(e->gid.raw, e->type) == 0)
      return make_error(errc::unavailable, "GID index " + std::to_string(wanted) + " of " + where +
                                               " holds no RoCE GID");
    return std::make_pair(static_cast<int>(wanted), e->gid);
  }
  int best = -1;
  int best_rank = 0;
  ibv_gid best_gid{};
  for (int i = 0; i < std::min(table_len, gid_table_scan_max); ++i) {
    auto e = read_gid(ctx, name, port, i);
    if (!e)
      continue;
    const int rank = gid_rank(e->gid.raw, e->type);
    if (rank > best_rank) {
      best = i;
      best_rank = rank;
      best_gid = e->gid;
    }
  }
  if (best < 0)
    return make_error(errc::unavailable,
                      where + " has no RoCE GID (is an IP address configured on its netdev?)");
  return std::make_pair(best, best_gid);
}

caf::expected<port_choice> describe_port(ibv_context* ctx, const std::string& name, uint8_t num,
                                         const ibv_port_attr& pa, int32_t gid_index) {
  port_choice c;
  c.num = num;
  c.mtu = pa.active_mtu;
  c.max_msg_bytes = pa.max_msg_sz;
  c.link_layer = pa.link_layer == IBV_LINK_LAYER_ETHERNET ? link_ethernet : link_infiniband;
  if (c.link_layer == link_ethernet) {
    auto gid = choose_roce_gid(ctx, name, num, pa.gid_tbl_len, gid_index);
    if (!gid)
      return std::move(gid.error());
    c.gid_index = gid->first;
    c.gid = gid->second;
    return c;
  }
  if (pa.lid == 0)
    return make_error(errc::unavailable, name + " port " + std::to_string(num) +
                                             " has no LID yet (is a subnet manager running?)");
  c.lid = pa.lid;
  c.gid_index = 0; // the port GID: its subnet prefix tells peers whether they share a subnet
  if (ibv_query_gid(ctx, num, 0, &c.gid) != 0)
    std::memset(&c.gid, 0, sizeof(c.gid));
  return c;
}

} // namespace

caf::expected<port_choice> choose_port(ibv_context* ctx, const std::string& device_name,
                                       uint8_t port_count, int32_t gid_index) {
  std::string why = device_name + " has no active port";
  for (int num = 1; num <= port_count; ++num) {
    ibv_port_attr pa{};
    const auto n = static_cast<uint8_t>(num);
    if (ibv_query_port(ctx, n, &pa) != 0 || pa.state != IBV_PORT_ACTIVE)
      continue;
    auto c = describe_port(ctx, device_name, n, pa, gid_index);
    if (c)
      return c;
    why = describe(c.error());
  }
  return make_error(errc::unavailable, why);
}

caf::expected<port_choice> describe_port_again(ibv_context* ctx, const std::string& device_name,
                                               uint8_t num, int32_t gid_index) {
  ibv_port_attr pa{};
  if (ibv_query_port(ctx, num, &pa) != 0 || pa.state != IBV_PORT_ACTIVE)
    return make_error(errc::unavailable,
                      device_name + " port " + std::to_string(num) + " is not active");
  return describe_port(ctx, device_name, num, pa, gid_index);
}

} // namespace crescent::transport::rdma
