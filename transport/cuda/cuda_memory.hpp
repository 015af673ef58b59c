// CUDA pieces of the cuda path (built only with CUDA): which device is current, the engine's
// copy streams, and peers' allocations opened through CUDA IPC. Only the runtime (cudart) is
// linked; the one driver function needed (cuMemGetAddressRange) is looked up at run time, so
// binaries still start where no driver is installed.
#pragma once

#include "transport/region_table.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <cuda_runtime_api.h>

#include <condition_variable>
#include <memory>
#include <mutex>
#include <vector>

namespace crescent::transport::cuda {

/// "cudaErrorInvalidValue (invalid argument)", and clears the thread's last error, so that an
/// error of ours never shows up in the application's next cudaGetLastError.
std::string error_text(cudaError_t rc);

/// Makes `device` current on the calling thread while it lives; restores the previous one.
class device_scope {
 public:
  explicit device_scope(int device);
  ~device_scope();
  device_scope(const device_scope&) = delete;
  device_scope& operator=(const device_scope&) = delete;
  /// Why the device could not be made current; none if it is.
  const caf::error& error() const { return error_; }

 private:
  int previous_ = -1;
  bool changed_ = false;
  caf::error error_;
};

/// Streams for copies: one per caller copying at a time and device, non-blocking (not ordered
/// with the legacy default stream, so the application's work there does not delay them).
class stream_pool {
 public:
  static constexpr size_t streams_per_device_max = 64;

  ~stream_pool();
  /// Copies `bytes` from `src` to `dst` (any of host, device or peer memory under unified
  /// addressing) with `device` current, and waits for the copy to end.
  caf::error copy(void* dst, const void* src, uint64_t bytes, int device);

 private:
  caf::expected<cudaStream_t> acquire(int device);
  void release(int device, cudaStream_t s);

  std::mutex mutex_;
  std::condition_variable freed_;
  std::vector<std::pair<int, cudaStream_t>> free_;
  std::vector<std::pair<int, cudaStream_t>> all_;
};

/// A peer's allocation, opened with cudaIpcOpenMemHandle on the local device with the same
/// PCI address; closed (cudaIpcCloseMemHandle) when the last user lets go.
struct ipc_mapping {
  std::byte* base = nullptr; // the allocation's first byte, in this process
  int device = -1;           // the local ordinal it was opened on
  ~ipc_mapping();
};

caf::expected<std::shared_ptr<ipc_mapping>> open_ipc(const device_export& d);

/// "0000:3b:00.0" of a packed PCI address (region_table.hpp).
std::string pci_text(uint64_t pci);

} // namespace crescent::transport::cuda
