// The kernel launchers behind kv_pages.hpp, in a header free of CAF so that nvcc (C++17) never
// compiles CAF's headers. Each returns a cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace crescent::gpu::kernels {

cudaError_t gather_pages(const void* const* pages, uint32_t count, size_t page_bytes, void* packed);
cudaError_t scatter_pages(const void* packed, uint32_t count, size_t page_bytes,
                          void* const* pages);

} // namespace crescent::gpu::kernels
