// Vocabulary of the transfer engine: operations, their states, peers and options.
#pragma once

#include "transport/memory_location.hpp"
#include "transport/region_handle.hpp"

#include <caf/error.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace crescent::transport {

enum class op_kind : uint8_t { read, write };

enum class op_state : uint8_t {
  pending,
  completed,
  failed,    // with a reason
  timed_out, // the batch's deadline passed first
  cancelled,
};

const char* to_string(op_state s);

/// One one-sided operation: bytes move between `local` and [remote_offset, remote_offset +
/// local.size()) of the remote handle, without the remote side's code taking part.
struct transfer_op {
  op_kind kind = op_kind::read;
  std::span<std::byte> local; // read: filled; write: sent. Must stay valid until the op ends.
  region_handle remote;
  uint64_t remote_offset = 0; // bytes into `remote`
  bool checksum = false;      // verify an xxh3 of every slice at the reading side
  // Where `local` lives. Stated by the caller, never guessed: only the cuda path may touch a
  // GPU buffer, and a GPU pointer stated as cpu memory would be memcpy'd (and crash). An op
  // with a cuda location and checksum = true is refused (no host copy to hash).
  memory_location local_location = memory_location::cpu();
  // A checked write's (checksum = true) xxh3 of all of `local` (messages/xxh3.hpp), when the
  // caller has it already, as a pool put has its block's checksum for the commit. A write that
  // goes in one slice is then checked against it where it lands, instead of against a hash of
  // `local` taken as it leaves: the bytes that land are the bytes the caller hashed (a buffer
  // changed since fails the write), and the bytes are hashed once less. Longer writes, and
  // every read, hash each slice as before.
  std::optional<uint64_t> local_checksum{};
};

struct op_result {
  op_state state = op_state::pending;
  caf::error reason; // for failed, timed_out and cancelled
  // How long after submit the operation ends in modeled time: on an engine with modeled links
  // (transfer_engine::create_modeled, simulated time) the links' answer; 0 on every real one,
  // where it has ended when its result is read.
  uint64_t modeled_ns = 0;
};

using clock_type = std::chrono::steady_clock;

/// One RDMA port through which a process can be reached (the first active port of a device).
struct rdma_port_info {
  std::string device;     // e.g. mlx5_0
  uint8_t port = 0;       // 1-based
  uint8_t link_layer = 0; // 1: InfiniBand, 2: Ethernet (RoCE)
  uint16_t lid = 0;       // InfiniBand only
  std::array<uint8_t, 16> gid{};

  friend bool operator==(const rdma_port_info&, const rdma_port_info&) = default;
};

/// What a process publishes about its engine so that others can reach its regions. It travels
/// in actor messages (wire::TransportPeer).
struct peer_info {
  std::vector<uint32_t> nodes; // nodes whose regions live in that process
  std::string host_id;         // same host_id: shared memory can be used
  int32_t pid = 0;
  std::string tcp_host; // data-plane server
  uint16_t tcp_port = 0;
  int32_t table_fd = -1; // region table, for peers on the same host
  uint64_t table_bytes = 0;
  std::vector<rdma_port_info> rdma_ports; // empty: the process has no RDMA path
};

struct transfer_options {
  std::vector<uint32_t> local_nodes; // nodes served by this engine (register_region's)
  // Operations are cut into slices whose size suits the path that carries them: small on paths
  // that spread slices over connections and devices (RDMA), larger on TCP, where every slice
  // costs several system calls on each side, and larger still on copy paths (in-process and
  // shared memory), where a slice is one memcpy and large copies run fastest.
  uint64_t slice_bytes = 64u << 10;
  uint64_t tcp_slice_bytes = 1u << 20;
  uint64_t copy_slice_bytes = 16u << 20;
  uint32_t region_capacity = 1u << 18; // regions and grants at once, at most (up to 2^20)
  uint64_t key_seed = 0;               // 0: random access keys
  bool enable_shm = true;
  bool enable_tcp = true;
  std::string tcp_bind_host = "127.0.0.1"; // where the data-plane server listens
  uint16_t tcp_port = 0;                   // 0: any free port
  // TCP connections to each peer; 0: one per two CPUs this process may run on, 1 to 4. More
  // connections than cores can run side by side only take turns: on 2 cores one connection moves
  // more than two (docs/benchmarks-archive.md).
  uint32_t tcp_connections_per_peer = 0;
  uint32_t slice_attempts_max = 3; // tries of one slice, across connections and paths
  // Of one TCP connection (10 ms..10 min). The RDMA path's control connection waits this long,
  // but at least 1 s, to connect and for each reply (the owner creates a queue pair meanwhile).
  std::chrono::milliseconds connect_timeout{2000};
  // The data-plane server drops a peer silent this long in the middle of a request, or taking
  // no byte of a response for this long in one send: it holds a region pinned meanwhile.
  std::chrono::milliseconds tcp_peer_silence_max{5000};
  // RDMA is used where rdma-core finds a device with an active port and enable_tcp is on: queue
  // pairs are set up through the TCP data-plane server (see transfer_engine.hpp).
  bool enable_rdma = true;
  // The cuda path (GPU memory in this process and, through CUDA IPC, in others on this host):
  // used where this binary was built with CUDA and the runtime finds a device.
  bool enable_cuda = true;
  uint32_t rdma_qps_per_peer = 2;  // reliable-connected queue pairs per pair of devices
  uint32_t rdma_queue_depth = 128; // work requests in flight per queue pair (and the device's max)
  // Devices by name (e.g. mlx5_0). Both empty: every device, the one on the NUMA node of the
  // local buffer first. Otherwise only these are opened, preferred ones first in the order
  // given, whatever the NUMA node; the fallback ones when no preferred one can be used.
  std::vector<std::string> rdma_preferred_devices;
  std::vector<std::string> rdma_fallback_devices;
  int32_t rdma_gid_index = -1; // RoCE: this GID table index; -1: the best RoCE v2 GID
  // What RDMA packets are marked with, for fabrics whose lossless class needs it (as set up for
  // PFC): RoCE's IP traffic class (DSCP << 2), and the service level (0..15) on both links.
  uint8_t rdma_traffic_class = 0;
  uint8_t rdma_service_level = 0; // RoCE carries 0..7 (802.1p): larger values are clamped to 7
  // How long a queue pair keeps trying to deliver before its work fails: each try waits
  // 4.096 us * 2^rdma_qp_timeout (1..31; 18: about 1.07 s) for an acknowledgement, and is
  // retried rdma_retry_count times (0..7); receiver-not-ready retries (0..7, 7: forever) do
  // not occur with one-sided READ and WRITE.
  uint8_t rdma_qp_timeout = 18;
  uint8_t rdma_retry_count = 7;
  uint8_t rdma_rnr_retry = 7;
  // Bounds on waiting for a NIC (rdma/rdma_policy.hpp, sweep_limits): a broken queue pair whose
  // flushed work has not all completed this long after it broke is destroyed (10 ms..60 s); work
  // of an expired batch still in flight this long after the deadline resets its queue pair
  // (10 ms..60 s). Longer suits fabrics with long retry chains; shorter frees buffers sooner.
  std::chrono::milliseconds rdma_flush_timeout{1000};
  std::chrono::milliseconds rdma_expired_grace{500};
  // Calls ibv_fork_init before the RDMA devices are opened (see rdma/rdma_device.cpp): only
  // for processes that fork while RDMA work runs, on kernels older than 5.13. Off by default:
  // it hides registered buffers from forked children, which then crash touching them.
  // RDMAV_FORK_SAFE=1 in the environment does the same.
  bool rdma_fork_safe = false;
};

/// Limits on what one call may ask for.
inline constexpr size_t batch_ops_max = 1u << 16;
inline constexpr size_t batches_max = 1u << 16; // submitted and not yet waited for
inline constexpr uint64_t slice_bytes_max = 16u << 20;
inline constexpr uint64_t op_bytes_max = 1ull << 36;
inline constexpr size_t rdma_devices_max = 16; // devices opened, and RDMA ports a peer advertises
inline constexpr size_t rdma_device_name_max = 63; // bytes

struct path_metrics {
  std::string backend; // local, cuda, shm, tcp, rdma
  uint32_t node = 0;   // the remote node
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;
  uint64_t operations = 0;
  uint64_t slices = 0;
  uint64_t retries = 0;
  uint64_t failures = 0;
};

} // namespace crescent::transport
