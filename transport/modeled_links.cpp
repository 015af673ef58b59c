#include "transport/modeled_links.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::transport {

modeled_links::modeled_links(uint32_t nodes, link_profile profile, clock now)
    : profile_(profile), now_(std::move(now)), out_(nodes), in_(nodes), local_(nodes) {
  assert(nodes >= 1 && nodes <= link_nodes_max);
  assert(profile.nic_bytes_per_s >= link_bytes_per_s_min &&
         profile.nic_bytes_per_s <= link_bytes_per_s_max);
  assert(profile.local_bytes_per_s >= link_bytes_per_s_min &&
         profile.local_bytes_per_s <= link_bytes_per_s_max);
  assert(profile.nic_latency_ns <= link_latency_ns_max);
  assert(profile.local_latency_ns <= link_latency_ns_max);
  assert(profile.bytes_scale >= 1 && profile.bytes_scale <= link_bytes_scale_max);
  assert(now_);
}

uint64_t modeled_links::duration_ns(uint64_t bytes, uint64_t bytes_per_s) const {
  // 128-bit: a 64 GiB operation scaled by 2^32 times 1e9 does not fit in 64 bits.
  const unsigned __int128 scaled = static_cast<unsigned __int128>(bytes) * profile_.bytes_scale;
  const unsigned __int128 ns = (scaled * 1'000'000'000u + bytes_per_s - 1) / bytes_per_s;
  return ns > UINT64_MAX / 4 ? UINT64_MAX / 4 : static_cast<uint64_t>(ns);
}

uint64_t modeled_links::reserve(uint32_t src, uint32_t dst, uint64_t bytes) {
  std::lock_guard guard{mutex_};
  const int64_t now = now_();
  const uint32_t n = nodes();
  if (src >= n || dst >= n)
    return profile_.nic_latency_ns;
  const bool within = src == dst;
  link* crossed[2] = {within ? &local_[src] : &out_[src], within ? nullptr : &in_[dst]};
  int64_t start = now;
  for (auto* l : crossed)
    if (l != nullptr)
      start = std::max(start, l->free_at_ns);
  const uint64_t hold =
      duration_ns(bytes, within ? profile_.local_bytes_per_s : profile_.nic_bytes_per_s);
  for (auto* l : crossed) {
    if (l == nullptr)
      continue;
    l->free_at_ns = start + static_cast<int64_t>(hold);
    l->usage.bytes += bytes * profile_.bytes_scale;
    l->usage.busy_ns += hold;
    ++l->usage.operations;
  }
  const uint64_t latency = within ? profile_.local_latency_ns : profile_.nic_latency_ns;
  return static_cast<uint64_t>(start - now) + hold + latency;
}

link_usage modeled_links::nic_out(uint32_t n) const {
  std::lock_guard guard{mutex_};
  return n < out_.size() ? out_[n].usage : link_usage{};
}

link_usage modeled_links::nic_in(uint32_t n) const {
  std::lock_guard guard{mutex_};
  return n < in_.size() ? in_[n].usage : link_usage{};
}

link_usage modeled_links::local(uint32_t n) const {
  std::lock_guard guard{mutex_};
  return n < local_.size() ? local_[n].usage : link_usage{};
}

} // namespace crescent::transport
