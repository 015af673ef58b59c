// CUDA devices of this machine. Always callable: without a CUDA build, a driver or a device it
// returns errc::unavailable with the reason, so callers and tests can skip cleanly.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace crescent::gpu {

struct cuda_device {
  int index = 0;
  std::string name;
  uint64_t memory_bytes = 0;
  int compute_major = 0;
  int compute_minor = 0;
  int pci_bus = 0;
};

/// True if this binary was built with CUDA code.
bool built_with_cuda();

caf::expected<std::vector<cuda_device>> cuda_devices();

/// Device `index` of cuda_devices(); errc::unavailable (naming how many there are) where this
/// machine has no such device.
caf::expected<cuda_device> cuda_device_at(int index);

} // namespace crescent::gpu
