#include "gpu/cuda/kv_pages_kernels.cuh"

namespace crescent::gpu::kernels {

namespace {

constexpr unsigned threads_per_page = 256;

// One block per page; threads stride over the page in 16-byte vectors.
__global__ void gather_kernel(const uint4* const* pages, size_t page_vectors, uint4* packed) {
  const uint4* src = pages[blockIdx.x];
  uint4* dst = packed + blockIdx.x * page_vectors;
  for (size_t i = threadIdx.x; i < page_vectors; i += blockDim.x)
    dst[i] = src[i];
}

__global__ void scatter_kernel(const uint4* packed, size_t page_vectors, uint4* const* pages) {
  const uint4* src = packed + blockIdx.x * page_vectors;
  uint4* dst = pages[blockIdx.x];
  for (size_t i = threadIdx.x; i < page_vectors; i += blockDim.x)
    dst[i] = src[i];
}

cudaError_t finish() {
  if (auto rc = cudaGetLastError(); rc != cudaSuccess)
    return rc;
  return cudaDeviceSynchronize();
}

} // namespace

cudaError_t gather_pages(const void* const* pages, uint32_t count, size_t page_bytes,
                         void* packed) {
  gather_kernel<<<count, threads_per_page>>>(reinterpret_cast<const uint4* const*>(pages),
                                             page_bytes / sizeof(uint4),
                                             static_cast<uint4*>(packed));
  return finish();
}

cudaError_t scatter_pages(const void* packed, uint32_t count, size_t page_bytes,
                          void* const* pages) {
  scatter_kernel<<<count, threads_per_page>>>(static_cast<const uint4*>(packed),
                                              page_bytes / sizeof(uint4),
                                              reinterpret_cast<uint4* const*>(pages));
  return finish();
}

} // namespace crescent::gpu::kernels
