// Host memory pinned and mapped into a CUDA device's address space: how the cuda engine reaches
// the KV pages of a cluster's workers, which stay host memory registered with the transfer
// engine as before (docs/gpu.md, "In a cluster").
#pragma once

#include <caf/expected.hpp>

#include <cstddef>
#include <memory>
#include <span>

namespace crescent::gpu {

/// Pins `bytes` and maps them for CUDA device `device` (cudaHostRegister, portable and mapped),
/// so that the device engine's kernels read and write them at the same addresses. The returned
/// handle unregisters them when its last copy goes, and holds `keepalive` (the memory's owner)
/// until then, so that the memory stays mapped while it is registered. Errors: unavailable
/// without CUDA or that device, or where the device cannot use the host addresses of registered
/// memory; io_error when the driver refuses the range.
caf::expected<std::shared_ptr<void>> map_for_device(std::span<std::byte> bytes, int device,
                                                    std::shared_ptr<const void> keepalive);

} // namespace crescent::gpu
