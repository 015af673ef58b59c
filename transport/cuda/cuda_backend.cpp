// The cuda path: operations whose local buffer or remote region is GPU memory, to regions of
// this process (pinned in the engine's own table) and of other processes on this host (their
// region tables mapped as the shm path does; GPU regions opened with CUDA IPC, host regions
// through their memfd segments). Each slice is one cudaMemcpyAsync on the engine's streams,
// waited for before the slice ends (see transfer_engine.hpp for the contract).
#include "messages/errors.hpp"
#include "transport/cuda/cuda_memory.hpp"
#include "transport/engine_internal.hpp"
#include "transport/host_peers.hpp"

#include <unistd.h>

#include <map>

namespace crescent::transport {

namespace {

class cuda_backend final : public backend {
 public:
  static constexpr size_t ipc_mappings_max = 1024;

  explicit cuda_backend(transfer_engine::impl& engine)
      : engine_(engine), self_pid_(static_cast<int32_t>(getpid())) {}

  const char* name() const override { return "cuda"; }

  bool carries_device_memory() const override { return true; }

  caf::error add_peer(const peer_info& info) override { return peers_.add(engine_.host_id, info); }

  void remove_peer(uint32_t node) override {
    if (auto p = peers_.remove(node))
      forget_mappings(p->info.pid);
  }

  // Only operations that involve GPU memory: host-only ones go to the other paths.
  bool can_carry(const transfer_op& op) const override {
    if (op.local_location.is_gpu())
      return true;
    if (engine_.is_local(op.remote.node)) {
      auto where = engine_.table->location_of(op.remote);
      return where && where->is_gpu();
    }
    auto peer = peers_.find(op.remote.node);
    if (!peer)
      return false;
    auto e = peer->table->lookup(op.remote, op.remote_offset, op.local.size());
    return e && e->device.location.is_gpu();
  }

  void start(slice_record& s) override {
    if (s.checksum)
      return complete_slice(s, make_error(errc::invalid_argument,
                                          "checksums are not supported on GPU memory: there is "
                                          "no host copy to hash"));
    if (stopping_.load())
      return complete_slice(s, make_error(errc::unavailable, "the transfer engine is stopping"));
    if (injected_failure(s))
      return;
    if (engine_.is_local(s.remote.node))
      return start_local(s);
    start_peer(s);
  }

  void stop() override {
    stopping_ = true;
    peers_.clear();
    std::lock_guard guard{mappings_mutex_};
    mappings_.clear();
  }

 private:
  using mapping_key = std::pair<int32_t, std::string>; // (peer pid, IPC handle bytes)

  // An injected corruption changes the destination once the copy has ended: no checksum is
  // ever asked of this path, so the slice arrives changed.
  caf::error copy(slice_record& s, std::byte* remote, memory_location remote_where) {
    std::byte* dst = s.kind == op_kind::read ? s.local : remote;
    const std::byte* src = s.kind == op_kind::read ? remote : s.local;
    const int device = s.local_location.is_gpu() ? s.local_location.device : remote_where.device;
    if (auto err = streams_.copy(dst, src, s.length, device))
      return err;
    if (s.fault != slice_fault::corrupt)
      return caf::none;
    return corrupt_landed(dst, s.length, s.kind == op_kind::read ? s.local_location : remote_where);
  }

  void start_local(slice_record& s) {
    auto remote = engine_.table->pin_any(s.remote, s.remote_offset, s.length);
    if (!remote)
      return complete_slice(s, std::move(remote.error()));
    auto err = copy(s, remote->first, remote->second);
    engine_.table->unpin(s.remote);
    complete_slice(s, std::move(err));
  }

  void start_peer(slice_record& s) {
    auto peer = peers_.find(s.remote.node);
    if (!peer)
      return complete_slice(s, make_error(errc::unavailable, "no route on this host for GPU "
                                                             "memory to node " +
                                                                 std::to_string(s.remote.node)));
    auto e = peer->table->lookup(s.remote, s.remote_offset, s.length);
    if (!e)
      return complete_slice(s, std::move(e.error()));
    const uint64_t into = s.remote.offset + s.remote_offset; // bytes into the region
    if (!e->device.location.is_gpu()) {
      auto bytes = peer->host_bytes(*e, s.remote, s.remote_offset, s.length);
      if (!bytes)
        return complete_slice(s, std::move(bytes.error()));
      return complete_slice(s, copy(s, bytes->second, memory_location::cpu()));
    }
    if (peer->info.pid == self_pid_) {
      // Another engine of this process: its device pointer is valid here (unified addressing),
      // and CUDA refuses to open a process's own IPC handles.
      auto* remote = reinterpret_cast<std::byte*>(e->address) + into;
      return complete_slice(s, copy(s, remote, e->device.location));
    }
    auto m = mapping(peer->info.pid, e->device);
    if (!m)
      return complete_slice(s, std::move(m.error()));
    auto* remote = (*m)->base + e->device.alloc_offset + into;
    complete_slice(s, copy(s, remote, memory_location::cuda((*m)->device)));
  }

  caf::expected<std::shared_ptr<cuda::ipc_mapping>> mapping(int32_t pid, const device_export& d) {
    mapping_key key{
        pid, std::string{reinterpret_cast<const char*>(d.ipc_handle.data()), d.ipc_handle.size()}};
    std::lock_guard guard{mappings_mutex_};
    if (auto i = mappings_.find(key); i != mappings_.end())
      return i->second;
    auto m = cuda::open_ipc(d);
    if (!m)
      return m;
    // Allocations of a long-lived peer come and go; closing all mappings now and then bounds
    // this cache (copies in flight keep theirs until they finish).
    if (mappings_.size() >= ipc_mappings_max)
      mappings_.clear();
    mappings_.emplace(std::move(key), *m);
    return m;
  }

  void forget_mappings(int32_t pid) {
    std::lock_guard guard{mappings_mutex_};
    mappings_.erase(mappings_.lower_bound({pid, std::string{}}),
                    mappings_.lower_bound({pid + 1, std::string{}}));
  }

  transfer_engine::impl& engine_;
  const int32_t self_pid_;
  std::atomic<bool> stopping_{false};
  host_peers peers_;
  cuda::stream_pool streams_;
  std::mutex mappings_mutex_;
  std::map<mapping_key, std::shared_ptr<cuda::ipc_mapping>> mappings_;
};

} // namespace

namespace {

// Asked once per process: where the driver is missing, the runtime looks for it again on every
// call (about 0.2 s here), and devices do not come and go under a running process.
const std::string& why_no_device() {
  static const std::string why = [] {
    int count = 0;
    if (auto rc = cudaGetDeviceCount(&count); rc != cudaSuccess)
      return "no CUDA device: " + cuda::error_text(rc);
    return count == 0 ? std::string{"the CUDA driver reports no device"} : std::string{};
  }();
  return why;
}

} // namespace

caf::expected<std::unique_ptr<backend>> make_cuda_backend(transfer_engine::impl& engine) {
  if (const auto& why = why_no_device(); !why.empty())
    return make_error(errc::unavailable, why);
  return std::unique_ptr<backend>{std::make_unique<cuda_backend>(engine)};
}

} // namespace crescent::transport
