#include "transport/device_memory.hpp"

#include "messages/errors.hpp"
#include "transport/cuda/cuda_memory.hpp"

#include <utility>

namespace crescent::transport {

device_memory::device_memory(device_memory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), length_(std::exchange(other.length_, 0)),
      device_(std::exchange(other.device_, -1)) {}

device_memory& device_memory::operator=(device_memory&& other) noexcept {
  if (this != &other) {
    device_memory gone{std::move(*this)};
    data_ = std::exchange(other.data_, nullptr);
    length_ = std::exchange(other.length_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

device_memory::~device_memory() {
  if (data_ == nullptr)
    return;
  cuda::device_scope scope{device_};
  (void)cudaFree(data_);
}

caf::expected<device_memory> device_memory::allocate(uint64_t length_bytes, int device) {
  const std::string what = "cannot allocate " + std::to_string(length_bytes) +
                           " bytes on cuda:" + std::to_string(device);
  if (length_bytes == 0)
    return make_error(errc::invalid_argument, what + ": the length is zero");
  cuda::device_scope scope{device};
  if (scope.error())
    return make_error(errc::unavailable, what + ": " + describe(scope.error()));
  void* p = nullptr;
  if (auto rc = cudaMalloc(&p, length_bytes); rc != cudaSuccess)
    return make_error(errc::unavailable, what + ": " + cuda::error_text(rc));
  device_memory m;
  m.data_ = static_cast<std::byte*>(p);
  m.length_ = length_bytes;
  m.device_ = device;
  // cudaMemset runs on the legacy stream, which the engine's non-blocking streams (and other
  // processes) do not wait for: the zeros are there only once it has ended.
  auto rc = cudaMemset(p, 0, length_bytes);
  if (rc == cudaSuccess)
    rc = cudaDeviceSynchronize();
  if (rc != cudaSuccess)
    return make_error(errc::unavailable, what + ": cudaMemset: " + cuda::error_text(rc));
  return m;
}

caf::error copy_and_wait(void* dst, const void* src, uint64_t bytes, int device) {
  cuda::device_scope scope{device};
  if (scope.error())
    return scope.error();
  if (auto rc = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault); rc != cudaSuccess)
    return make_error(errc::io_error, "cudaMemcpy of " + std::to_string(bytes) + " bytes on cuda:" +
                                          std::to_string(device) + ": " + cuda::error_text(rc));
  return caf::none;
}

} // namespace crescent::transport
