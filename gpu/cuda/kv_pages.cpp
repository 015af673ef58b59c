#include "gpu/cuda/kv_pages.hpp"

#include "gpu/cuda/kv_pages_kernels.cuh"
#include "messages/errors.hpp"

#include <string>

namespace crescent::gpu {

namespace {

constexpr uint32_t pages_per_call_max = 65535; // one CUDA grid dimension

caf::error check_shape(uint32_t count, size_t page_bytes) {
  if (page_bytes == 0 || page_bytes % 16 != 0)
    return make_error(errc::invalid_argument, "page size must be a positive multiple of 16");
  if (count > pages_per_call_max)
    return make_error(errc::limit_exceeded, "at most 65535 pages per call");
  return caf::none;
}

caf::error to_error(cudaError_t rc, const char* what) {
  if (rc == cudaSuccess)
    return caf::none;
  const bool absent = rc == cudaErrorNoDevice || rc == cudaErrorInsufficientDriver;
  return make_error(absent ? errc::unavailable : errc::io_error,
                    std::string{what} + ": " + cudaGetErrorString(rc));
}

} // namespace

caf::error gather_pages(const std::byte* const* pages, uint32_t count, size_t page_bytes,
                        std::byte* packed) {
  if (auto err = check_shape(count, page_bytes))
    return err;
  if (count == 0)
    return caf::none;
  return to_error(
      kernels::gather_pages(reinterpret_cast<const void* const*>(pages), count, page_bytes, packed),
      "gather_pages");
}

caf::error scatter_pages(const std::byte* packed, uint32_t count, size_t page_bytes,
                         std::byte* const* pages) {
  if (auto err = check_shape(count, page_bytes))
    return err;
  if (count == 0)
    return caf::none;
  return to_error(
      kernels::scatter_pages(packed, count, page_bytes, reinterpret_cast<void* const*>(pages)),
      "scatter_pages");
}

} // namespace crescent::gpu
