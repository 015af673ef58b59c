#include "transport/rdma/rdma_devices.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_policy.hpp"

#ifdef CRESCENT_HAVE_RDMA
#include <infiniband/verbs.h>
#endif

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace crescent::transport {

#ifdef CRESCENT_HAVE_RDMA

namespace {

// sysfs knows where the device sits: /sys/class/infiniband/<dev>/device -> the PCI function.
void read_topology(rdma_device& d) {
  const std::filesystem::path dev = "/sys/class/infiniband/" + d.name + "/device";
  std::ifstream numa{dev / "numa_node"};
  if (!(numa >> d.numa_node))
    d.numa_node = -1;
  std::error_code ec;
  auto target = std::filesystem::canonical(dev, ec);
  if (!ec)
    d.pci_address = target.filename().string();
}

} // namespace

bool built_with_rdma() {
  return true;
}

static_assert(IBV_TRANSPORT_IB == rdma::transport_infiniband &&
              IBV_TRANSPORT_IWARP == rdma::transport_iwarp &&
              IBV_TRANSPORT_USNIC == rdma::transport_usnic &&
              IBV_TRANSPORT_USNIC_UDP == rdma::transport_usnic_udp &&
              IBV_TRANSPORT_UNSPECIFIED == rdma::transport_unspecified);

caf::expected<std::vector<rdma_device>> rdma_devices(std::vector<std::string>* skipped) {
  int count = 0;
  errno = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (list == nullptr)
    return make_error(errc::unavailable,
                      std::string{"no RDMA devices: "} +
                          (errno != 0 ? std::strerror(errno) : "ibv_get_device_list failed"));
  std::vector<rdma_device> out;
  std::string reasons;
  for (int i = 0; i < count; ++i) {
    rdma_device d;
    d.name = ibv_get_device_name(list[i]);
    // Filtered before the device is opened: an unsupported one is never touched.
    if (auto why = rdma::unsupported_transport(list[i]->transport_type); !why.empty()) {
      reasons += (reasons.empty() ? "" : "; ") + d.name + ": " + why;
      if (skipped != nullptr)
        skipped->push_back(d.name + ": " + why);
      continue;
    }
    d.node_guid = ibv_get_device_guid(list[i]);
    if (ibv_context* ctx = ibv_open_device(list[i])) {
      ibv_device_attr attr{};
      if (ibv_query_device(ctx, &attr) == 0)
        d.ports = attr.phys_port_cnt;
      ibv_close_device(ctx);
    }
    read_topology(d);
    out.push_back(std::move(d));
  }
  ibv_free_device_list(list);
  if (out.empty())
    return make_error(errc::unavailable, reasons.empty()
                                             ? std::string{"rdma-core finds no RDMA device"}
                                             : "rdma-core finds no usable RDMA device: " + reasons);
  return out;
}

#else

bool built_with_rdma() {
  return false;
}

caf::expected<std::vector<rdma_device>> rdma_devices(std::vector<std::string>*) {
  return make_error(errc::unavailable, "this binary was built without rdma-core");
}

#endif

} // namespace crescent::transport
