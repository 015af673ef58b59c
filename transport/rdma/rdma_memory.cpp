#include "transport/rdma/rdma_memory.hpp"

#include "messages/errors.hpp"
#include "transport/rdma/rdma_topology.hpp"

#include <cerrno>
#include <cstring>
#include <mutex>

namespace crescent::transport::rdma {

namespace {

// Relaxed ordering lets the NIC reorder its PCIe writes, which helps where root complexes order
// them slowly; it is an optional flag that rdma-core drops where unsupported.
constexpr int access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ |
                             IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_RELAXED_ORDERING;

std::string registration_failed(const device& d, int err) {
  std::string hint;
  if (err == ENOMEM || err == EPERM || err == EAGAIN)
    hint = " (is the locked-memory limit, ulimit -l, high enough?)";
  return d.name() + " refused it: " + std::strerror(err) + hint;
}

} // namespace

registration::~registration() {
  for (auto* mr : mrs)
    if (mr != nullptr)
      ibv_dereg_mr(mr);
}

void memory_registry::add(const region_handle& region, std::byte* base,
                          const std::vector<std::unique_ptr<device>>& devices,
                          const order_function& order) {
  auto r = std::make_shared<registration>();
  r->region_id = region.region_id;
  r->base = base;
  r->length = region.length;
  r->mrs.assign(devices.size(), nullptr);
  for (size_t i = 0; i < devices.size(); ++i) {
    const auto& d = *devices[i];
    if (d.failed()) {
      r->refusals += (r->refusals.empty() ? "" : "; ") + d.name() + " has failed";
      continue;
    }
    errno = 0;
    r->mrs[i] = ibv_reg_mr(d.pd(), base, region.length, access_flags);
    if (r->mrs[i] == nullptr)
      r->refusals +=
          (r->refusals.empty() ? "" : "; ") + registration_failed(d, errno != 0 ? errno : EINVAL);
  }
  // The pages are pinned now (if any device took them), so asking where they are faults
  // nothing in.
  r->numa_node = numa_node_of(base);
  for (size_t i : order(r->numa_node))
    if (i < r->mrs.size() && r->mrs[i] != nullptr)
      r->order.push_back(i);
  std::unique_lock guard{mutex_};
  regions_[region.region_id] = std::move(r);
}

void memory_registry::remove(uint64_t region_id) {
  std::shared_ptr<const registration> gone;
  {
    std::unique_lock guard{mutex_};
    auto i = regions_.find(region_id);
    if (i == regions_.end())
      return;
    gone = std::move(i->second);
    regions_.erase(i);
  }
  // Deregistered here, outside the lock, unless work still holds it.
}

std::shared_ptr<const registration> memory_registry::find(uint64_t region_id) const {
  std::shared_lock guard{mutex_};
  auto i = regions_.find(region_id);
  return i == regions_.end() ? nullptr : i->second;
}

std::vector<region_key>
memory_registry::keys_of(uint64_t region_id,
                         const std::vector<std::unique_ptr<device>>& devices) const {
  std::vector<region_key> out;
  auto r = find(region_id);
  if (!r)
    return out;
  for (size_t i : r->order) { // devices that took the memory only
    if (out.size() >= rdma_devices_max || devices[i]->failed())
      continue;
    region_key k{};
    set_name(k.device, devices[i]->name());
    k.rkey = r->mrs[i]->rkey;
    out.push_back(k);
  }
  return out;
}

void memory_registry::clear() {
  std::unordered_map<uint64_t, std::shared_ptr<const registration>> gone;
  {
    std::unique_lock guard{mutex_};
    gone.swap(regions_);
  }
}

} // namespace crescent::transport::rdma
