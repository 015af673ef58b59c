#include "transport/modeled_links.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::transport {

modeled_links::modeled_links(uint32_t nodes, link_profile profile, clock now)
    : profile_(profile), now_(std::move(now)), out_(nodes), in_(nodes), local_(nodes),
      ssd_read_(nodes), ssd_write_(nodes) {
  assert(nodes >= 1 && nodes <= link_nodes_max);
  assert(profile.nic_bytes_per_s >= link_bytes_per_s_min &&
         profile.nic_bytes_per_s <= link_bytes_per_s_max);
  assert(profile.local_bytes_per_s >= link_bytes_per_s_min &&
         profile.local_bytes_per_s <= link_bytes_per_s_max);
  assert(profile.nic_latency_ns <= link_latency_ns_max);
  assert(profile.local_latency_ns <= link_latency_ns_max);
  assert(profile.ssd_latency_ns <= link_latency_ns_max);
  assert(profile.bytes_scale >= 1 && profile.bytes_scale <= link_bytes_scale_max);
  assert(now_);
}

uint64_t modeled_links::duration_ns(uint64_t bytes, uint64_t bytes_per_s) const {
  // 128-bit: a 64 GiB operation scaled by 2^32 times 1e9 does not fit in 64 bits.
  const unsigned __int128 scaled = static_cast<unsigned __int128>(bytes) * profile_.bytes_scale;
  const unsigned __int128 ns = (scaled * 1'000'000'000u + bytes_per_s - 1) / bytes_per_s;
  return ns > UINT64_MAX / 4 ? UINT64_MAX / 4 : static_cast<uint64_t>(ns);
}

uint64_t modeled_links::hold(std::span<link* const> crossed, int64_t now_ns, uint64_t hold_ns,
                             uint64_t bytes) {
  int64_t start = now_ns;
  for (auto* l : crossed)
    if (l != nullptr)
      start = std::max(start, l->free_at_ns);
  for (auto* l : crossed) {
    if (l == nullptr)
      continue;
    l->free_at_ns = start + static_cast<int64_t>(hold_ns);
    l->usage.bytes += bytes * profile_.bytes_scale;
    l->usage.busy_ns += hold_ns;
    ++l->usage.operations;
  }
  return static_cast<uint64_t>(start - now_ns);
}

uint64_t modeled_links::reserve(uint32_t src, uint32_t dst, uint64_t bytes) {
  std::lock_guard guard{mutex_};
  const int64_t now = now_();
  const uint32_t n = nodes();
  if (src >= n || dst >= n)
    return profile_.nic_latency_ns;
  const bool within = src == dst;
  link* const crossed[2] = {within ? &local_[src] : &out_[src], within ? nullptr : &in_[dst]};
  const uint64_t hold_ns =
      duration_ns(bytes, within ? profile_.local_bytes_per_s : profile_.nic_bytes_per_s);
  const uint64_t wait_ns = hold(crossed, now, hold_ns, bytes);
  const uint64_t latency = within ? profile_.local_latency_ns : profile_.nic_latency_ns;
  return wait_ns + hold_ns + latency;
}

uint64_t modeled_links::reserve_ssd(uint32_t node, uint64_t bytes, bool write) {
  const uint64_t bytes_per_s =
      write ? profile_.ssd_write_bytes_per_s : profile_.ssd_read_bytes_per_s;
  assert(bytes_per_s >= link_bytes_per_s_min && bytes_per_s <= link_bytes_per_s_max);
  assert(node < nodes());
  std::lock_guard guard{mutex_};
  link* const crossed[1] = {write ? &ssd_write_[node] : &ssd_read_[node]};
  const uint64_t hold_ns = duration_ns(bytes, bytes_per_s);
  return hold(crossed, now_(), hold_ns, bytes) + hold_ns + profile_.ssd_latency_ns;
}

link_usage modeled_links::usage_of(const std::vector<link>& links, uint32_t n) const {
  std::lock_guard guard{mutex_};
  return n < links.size() ? links[n].usage : link_usage{};
}

link_usage modeled_links::nic_out(uint32_t n) const {
  return usage_of(out_, n);
}
link_usage modeled_links::nic_in(uint32_t n) const {
  return usage_of(in_, n);
}
link_usage modeled_links::local(uint32_t n) const {
  return usage_of(local_, n);
}
link_usage modeled_links::ssd_read(uint32_t n) const {
  return usage_of(ssd_read_, n);
}
link_usage modeled_links::ssd_write(uint32_t n) const {
  return usage_of(ssd_write_, n);
}

} // namespace crescent::transport
