// Modeled links, for simulated time: how long the transfer engine's operations would take on a
// modeled cluster, whose memory holds stand-ins instead of KV bytes (gpu/modeled_engine.hpp).
//
// Every node has a NIC with one link out and one link in, each of nic_bytes_per_s, and one link
// between its own memories (host DRAM and GPU: the host-to-device bandwidth) of
// local_bytes_per_s. An operation between two nodes crosses the sender's link out and the
// receiver's link in; one within a node crosses that node's local link.
//
// A node with an SSD tier has two links more, from its DRAM to the SSD (writes) and back (reads):
// a drive serves reads and writes side by side, each at its own bandwidth, so an offload never
// holds up a read behind it; within each, FIFO as below.
//
// Sharing is FIFO: an operation starts once every link it crosses has finished what it carried
// before, holds them all for bytes / bandwidth (the slowest of them), and ends a latency later
// (the latency does not hold the links: operations pipeline behind each other). So two equal
// flows that start together through one NIC take turns: the second ends when both would under
// processor sharing, the first earlier than it would there. FIFO was chosen because an operation's
// end is then known when it starts, so it needs no events of its own: the actor that submitted it
// learns of its end through one delayed message (actors/common/modeled_delay.hpp).
//
// Bytes are scaled: modeled memory holds each KV page as a small stand-in, so every byte the
// engine moves stands for `bytes_scale` bytes of KV.
//
// Deterministic: integer nanoseconds, and the same reservations in the same order give the
// same times. Thread-safe, though the simulation that uses it runs on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <span>
#include <vector>

namespace crescent::transport {

struct link_profile {
  uint64_t nic_bytes_per_s = 100'000'000'000;   // each NIC, each direction: 800 Gbps
  uint64_t local_bytes_per_s = 128'000'000'000; // within a node: host-to-device
  uint64_t nic_latency_ns = 5'000;              // added to each operation between nodes
  uint64_t local_latency_ns = 0;                // added to each operation within a node
  uint64_t bytes_scale = 1;                     // modeled bytes per byte moved
  uint64_t ssd_read_bytes_per_s = 0;            // 0: no SSD modeled (reserve_ssd asserts)
  uint64_t ssd_write_bytes_per_s = 0;
  uint64_t ssd_latency_ns = 0; // added to each SSD read or write
};

/// Bounds on a link profile: bandwidths of 1 MB/s to 100 TB/s, latencies up to 1 s, scales up
/// to 2^32.
inline constexpr uint64_t link_bytes_per_s_min = 1'000'000;
inline constexpr uint64_t link_bytes_per_s_max = 100'000'000'000'000;
inline constexpr uint64_t link_latency_ns_max = 1'000'000'000;
inline constexpr uint64_t link_bytes_scale_max = uint64_t{1} << 32;
inline constexpr uint32_t link_nodes_max = 1024;

/// What one link carried.
struct link_usage {
  uint64_t bytes = 0;   // modeled bytes
  uint64_t busy_ns = 0; // time it carried something
  uint64_t operations = 0;
};

class modeled_links {
 public:
  using clock = std::function<int64_t()>; // the simulation's time, in nanoseconds

  /// Asserts that the profile is within the bounds above and that nodes is 1..link_nodes_max
  /// (both are checked where they are read from a file).
  modeled_links(uint32_t nodes, link_profile profile, clock now);

  /// Reserves the links that `bytes` moved from node `src` to node `dst` cross, behind what they
  /// already carry, and returns how long from now until the operation ends. Nodes outside the
  /// cluster cross no link (the operation fails on its route anyway): latency only.
  uint64_t reserve(uint32_t src, uint32_t dst, uint64_t bytes);

  /// Reserves node `node`'s SSD for reading (or writing) `bytes`, behind what that direction
  /// already carries, and returns how long from now until the operation ends. Asserts that the
  /// profile has an SSD (the cluster's check refuses an SSD tier on a profile without one).
  uint64_t reserve_ssd(uint32_t node, uint64_t bytes, bool write);

  /// Usage of node n's links: out through its NIC, in through it, within the node, and to and
  /// from its SSD.
  link_usage nic_out(uint32_t n) const;
  link_usage nic_in(uint32_t n) const;
  link_usage local(uint32_t n) const;
  link_usage ssd_read(uint32_t n) const;
  link_usage ssd_write(uint32_t n) const;

  uint32_t nodes() const { return static_cast<uint32_t>(out_.size()); }
  const link_profile& profile() const { return profile_; }

 private:
  struct link {
    int64_t free_at_ns = 0;
    link_usage usage;
  };

  /// Holds the links in `crossed` (nullptr: none) for `hold_ns` behind what they carry; returns
  /// how long after `now_ns` the hold starts.
  uint64_t hold(std::span<link* const> crossed, int64_t now_ns, uint64_t hold_ns, uint64_t bytes);

  /// Usage of links[n]; none past the cluster.
  link_usage usage_of(const std::vector<link>& links, uint32_t n) const;

  /// Nanoseconds `bytes` take at `bytes_per_s`, rounded up.
  uint64_t duration_ns(uint64_t bytes, uint64_t bytes_per_s) const;

  link_profile profile_;
  clock now_;
  mutable std::mutex mutex_;
  std::vector<link> out_, in_, local_, ssd_read_, ssd_write_;
};

} // namespace crescent::transport
