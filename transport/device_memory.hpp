// Memory of a CUDA device for callers that do not include CUDA's headers: the benchmark's GPU
// regions and buffers, and its cudaMemcpy baseline. In a binary built without CUDA, or on a
// machine without a GPU, every call fails with unavailable and the reason.
#pragma once

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>

namespace crescent::transport {

class device_memory {
 public:
  device_memory() = default;
  device_memory(device_memory&& other) noexcept;
  device_memory& operator=(device_memory&& other) noexcept;
  device_memory(const device_memory&) = delete;
  device_memory& operator=(const device_memory&) = delete;
  ~device_memory();

  /// cudaMalloc of `length_bytes` on `device`, zeroed. The allocation can be registered as
  /// cuda:<device> and exported to other processes of the host (CUDA IPC).
  static caf::expected<device_memory> allocate(uint64_t length_bytes, int device);

  std::byte* data() const { return data_; }
  uint64_t size_bytes() const { return length_; }
  int device() const { return device_; }

 private:
  std::byte* data_ = nullptr;
  uint64_t length_ = 0;
  int device_ = -1;
};

/// Copies `bytes` from `src` to `dst` (host or device memory, unified addressing) with
/// `device` current, as one cudaMemcpy, and returns when the copy has ended.
caf::error copy_and_wait(void* dst, const void* src, uint64_t bytes, int device);

} // namespace crescent::transport
