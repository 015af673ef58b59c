// Registering GPU memory: checks that a range is memory of the named device inside one
// allocation, and exports that allocation for CUDA IPC.
#include "messages/errors.hpp"
#include "transport/cuda/cuda_memory.hpp"
#include "transport/engine_internal.hpp"

#include <cuda.h> // types only: libcuda is never linked (see address_range)

#include <cassert>
#include <cstring>
#include <mutex>

namespace crescent::transport {

namespace {

using address_range_fn = CUresult(CUDAAPI*)(CUdeviceptr*, size_t*, CUdeviceptr);

// cuMemGetAddressRange, from the driver the runtime loaded: linking libcuda would keep the
// binary from starting where no driver is installed.
caf::expected<address_range_fn> address_range() {
  static std::once_flag once;
  static address_range_fn fn = nullptr;
  static std::string why;
  std::call_once(once, [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult status = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    // 12000: the ABI of cuMemGetAddressRange as of CUDA 12 (its _v2, 64-bit sizes).
    auto rc = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 12000, cudaEnableDefault,
                                               &status);
#else
    auto rc = cudaGetDriverEntryPoint("cuMemGetAddressRange", &p, cudaEnableDefault, &status);
#endif
    if (rc != cudaSuccess)
      why = cuda::error_text(rc);
    else if (status != cudaDriverEntryPointSuccess || p == nullptr)
      why = "the driver has no cuMemGetAddressRange (query result " +
            std::to_string(static_cast<int>(status)) + ")";
    else
      fn = reinterpret_cast<address_range_fn>(p);
  });
  if (fn == nullptr)
    return make_error(errc::unavailable, "cannot look up cuMemGetAddressRange: " + why);
  return fn;
}

const char* type_name(cudaMemoryType t) {
  switch (t) {
  case cudaMemoryTypeUnregistered:
    return "host memory unknown to CUDA";
  case cudaMemoryTypeHost:
    return "page-locked host memory (register it as cpu)";
  case cudaMemoryTypeDevice:
    return "device memory";
  case cudaMemoryTypeManaged:
    return "managed memory (register it as cpu; its pages migrate)";
  }
  return "memory of an unknown type";
}

// Both ends of the range must be device memory of `where`: the first byte's attributes say
// nothing of the last one's.
caf::error check_ends(const std::byte* base, uint64_t length, memory_location where,
                      const std::string& what) {
  for (const std::byte* p : {base, base + (length - 1)}) {
    cudaPointerAttributes a{};
    if (auto rc = cudaPointerGetAttributes(&a, p); rc != cudaSuccess)
      return make_error(errc::invalid_argument,
                        what + ": cudaPointerGetAttributes: " + cuda::error_text(rc));
    if (a.type != cudaMemoryTypeDevice)
      return make_error(errc::invalid_argument,
                        what + " holds " + type_name(a.type) + ", not device memory");
    if (a.device != where.device)
      return make_error(errc::invalid_argument,
                        what + " holds memory of cuda:" + std::to_string(a.device));
  }
  return caf::none;
}

uint64_t pci_of(int device) {
  int domain = 0, bus = 0, dev = 0;
  (void)cudaDeviceGetAttribute(&domain, cudaDevAttrPciDomainId, device);
  (void)cudaDeviceGetAttribute(&bus, cudaDevAttrPciBusId, device);
  (void)cudaDeviceGetAttribute(&dev, cudaDevAttrPciDeviceId, device);
  return (uint64_t{static_cast<uint32_t>(domain)} << 16) | ((bus & 0xff) << 8) | (dev & 0xff);
}

} // namespace

caf::expected<device_export> export_device_memory(std::byte* base, uint64_t length,
                                                  memory_location where) {
  const std::string what = "cannot register [" + std::to_string(reinterpret_cast<uintptr_t>(base)) +
                           ", +" + std::to_string(length) + ") as " + to_string(where);
  assert(base != nullptr && length > 0 && where.is_gpu());
  cuda::device_scope scope{where.device};
  if (scope.error())
    return make_error(errc::invalid_argument, what + ": " + describe(scope.error()));
  if (auto err = check_ends(base, length, where, what))
    return err;
  auto range = address_range();
  if (!range)
    return std::move(range.error());
  CUdeviceptr first = 0;
  size_t bytes = 0;
  if (auto rc = (*range)(&first, &bytes, reinterpret_cast<CUdeviceptr>(base)); rc != CUDA_SUCCESS)
    return make_error(errc::invalid_argument,
                      what + ": cuMemGetAddressRange failed (" + std::to_string(rc) + ")");
  const uint64_t offset = reinterpret_cast<uintptr_t>(base) - first;
  if (offset > bytes || length > bytes - offset)
    return make_error(errc::invalid_argument, what +
                                                  ": it spans more than one allocation (its "
                                                  "first byte's has " +
                                                  std::to_string(bytes) + " bytes)");
  device_export d;
  d.location = where;
  d.alloc_offset = offset;
  d.pci = pci_of(where.device);
  cudaIpcMemHandle_t handle;
  // Memory that CUDA IPC cannot export (cuMemCreate, pools) stays usable in this process.
  if (cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(first)) == cudaSuccess) {
    d.exportable = true;
    std::memcpy(d.ipc_handle.data(), &handle, sizeof(handle));
  } else {
    (void)cudaGetLastError();
  }
  return d;
}

} // namespace crescent::transport
