// Peers on this host as the copy paths (shm, cuda) see them: each peer's region table, mapped
// read-only, and the memfd segments its host regions live in, mapped on first use through
// /proc/<pid>/fd. The owner's code takes no part in a copy.
#pragma once

#include "transport/region_table.hpp"
#include "transport/transfer_types.hpp"

#include <caf/expected.hpp>

#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

namespace crescent::transport {

/// One mapped segment of a peer; unmapped when the last user lets go.
struct segment_map {
  std::byte* base = nullptr;
  uint64_t bytes = 0;
  ~segment_map();
};

struct host_peer {
  static constexpr size_t segments_max = 4096;

  peer_info info;
  std::unique_ptr<remote_region_table> table;

  /// The host memory of [offset, offset + length) of `h`, whose entry `e` the table gave: the
  /// mapping comes back too, to hold while copying. unavailable if `e` is not in a segment.
  caf::expected<std::pair<std::shared_ptr<segment_map>, std::byte*>>
  host_bytes(const region_entry& e, const region_handle& h, uint64_t offset, uint64_t length);

 private:
  std::mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<segment_map>> segments_; // by segment id
};

/// Peers by node; thread-safe.
class host_peers {
 public:
  /// Maps the peer's region table; unavailable if it is on another host or shares none.
  caf::error add(const std::string& host_id, const peer_info& info);
  /// Forgets the peer serving `node` (all its nodes); returns it, or null if unknown.
  std::shared_ptr<host_peer> remove(uint32_t node);
  std::shared_ptr<host_peer> find(uint32_t node) const;
  void clear();

 private:
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<host_peer>> peers_;
};

} // namespace crescent::transport
