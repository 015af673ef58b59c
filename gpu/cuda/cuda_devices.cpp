#include "gpu/cuda/cuda_devices.hpp"

#include "messages/errors.hpp"

#ifdef CRESCENT_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace crescent::gpu {

#ifdef CRESCENT_HAVE_CUDA

bool built_with_cuda() {
  return true;
}

caf::expected<std::vector<cuda_device>> cuda_devices() {
  int count = 0;
  // Only the runtime is linked; it loads the driver here, and reports its absence as an error.
  if (auto rc = cudaGetDeviceCount(&count); rc != cudaSuccess)
    return make_error(errc::unavailable, std::string{"no CUDA device: "} + cudaGetErrorString(rc) +
                                             " (" + std::to_string(static_cast<int>(rc)) + ")");
  std::vector<cuda_device> out;
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (auto rc = cudaGetDeviceProperties(&prop, i); rc != cudaSuccess)
      return make_error(errc::unavailable, std::string{"CUDA device "} + std::to_string(i) + ": " +
                                               cudaGetErrorString(rc));
    out.push_back({i, prop.name, prop.totalGlobalMem, prop.major, prop.minor, prop.pciBusID});
  }
  if (out.empty())
    return make_error(errc::unavailable, "the CUDA driver reports no device");
  return out;
}

#else

bool built_with_cuda() {
  return false;
}

caf::expected<std::vector<cuda_device>> cuda_devices() {
  return make_error(errc::unavailable, "this binary was built without CUDA (nvcc not found)");
}

#endif

caf::expected<cuda_device> cuda_device_at(int index) {
  auto devices = cuda_devices();
  if (!devices)
    return devices.error();
  for (const auto& d : *devices)
    if (d.index == index)
      return d;
  return make_error(errc::unavailable, "no CUDA device " + std::to_string(index) +
                                           " (this machine has " + std::to_string(devices->size()) +
                                           ")");
}

} // namespace crescent::gpu
