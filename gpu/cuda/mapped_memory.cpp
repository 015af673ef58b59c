#include "gpu/cuda/mapped_memory.hpp"

#include "gpu/cuda/cuda_devices.hpp"
#include "messages/errors.hpp"

#ifdef CRESCENT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#include <string>
#include <utility>

namespace crescent::gpu {

#ifdef CRESCENT_HAVE_CUDA

caf::expected<std::shared_ptr<void>> map_for_device(std::span<std::byte> bytes, int device,
                                                    std::shared_ptr<const void> keepalive) {
  if (auto found = cuda_device_at(device); !found)
    return found.error();
  const std::string name = "CUDA device " + std::to_string(device);
  if (auto rc = cudaSetDevice(device); rc != cudaSuccess)
    return make_error(errc::unavailable, name + ": " + cudaGetErrorString(rc));
  // The kernels are given the pages' host addresses: the device must accept them as they are.
  int same_addresses = 0;
  cudaDeviceGetAttribute(&same_addresses, cudaDevAttrCanUseHostPointerForRegisteredMem, device);
  if (same_addresses == 0)
    return make_error(errc::unavailable, name + " cannot use the host addresses of registered "
                                                "memory, which the cuda engine's pages need");
  if (auto rc = cudaHostRegister(bytes.data(), bytes.size(),
                                 cudaHostRegisterPortable | cudaHostRegisterMapped);
      rc != cudaSuccess)
    return make_error(errc::io_error, name + ": cudaHostRegister of " +
                                          std::to_string(bytes.size()) +
                                          " bytes of KV pages: " + cudaGetErrorString(rc));
  return std::shared_ptr<void>(bytes.data(), [device, keep = std::move(keepalive)](void* p) {
    // Before `keep` lets the memory go: an unmapped range must not stay registered.
    if (cudaSetDevice(device) == cudaSuccess)
      cudaHostUnregister(p);
  });
}

#else

caf::expected<std::shared_ptr<void>> map_for_device(std::span<std::byte>, int,
                                                    std::shared_ptr<const void>) {
  return make_error(errc::unavailable, "this binary was built without CUDA (nvcc not found)");
}

#endif

} // namespace crescent::gpu
