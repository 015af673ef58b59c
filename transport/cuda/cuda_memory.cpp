#include "transport/cuda/cuda_memory.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace crescent::transport::cuda {

std::string error_text(cudaError_t rc) {
  (void)cudaGetLastError();
  return std::string{cudaGetErrorName(rc)} + " (" + cudaGetErrorString(rc) + ")";
}

std::string pci_text(uint64_t pci) {
  char text[32];
  std::snprintf(text, sizeof(text), "%04x:%02x:%02x.0", static_cast<unsigned>(pci >> 16),
                static_cast<unsigned>((pci >> 8) & 0xff), static_cast<unsigned>(pci & 0xff));
  return text;
}

device_scope::device_scope(int device) {
  if (auto rc = cudaGetDevice(&previous_); rc != cudaSuccess) {
    error_ = make_error(errc::unavailable, "cudaGetDevice: " + error_text(rc));
    return;
  }
  if (previous_ == device)
    return;
  if (auto rc = cudaSetDevice(device); rc != cudaSuccess) {
    error_ = make_error(errc::unavailable,
                        "cudaSetDevice(" + std::to_string(device) + "): " + error_text(rc));
    return;
  }
  changed_ = true;
}

device_scope::~device_scope() {
  if (changed_)
    (void)cudaSetDevice(previous_);
}

stream_pool::~stream_pool() {
  for (auto [device, s] : all_) {
    device_scope scope{device};
    (void)cudaStreamDestroy(s);
  }
}

caf::expected<cudaStream_t> stream_pool::acquire(int device) {
  std::unique_lock guard{mutex_};
  for (;;) {
    for (auto i = free_.begin(); i != free_.end(); ++i)
      if (i->first == device) {
        auto s = i->second;
        free_.erase(i);
        return s;
      }
    const auto mine =
        std::count_if(all_.begin(), all_.end(), [&](const auto& e) { return e.first == device; });
    if (static_cast<size_t>(mine) < streams_per_device_max)
      break;
    freed_.wait(guard); // more callers copy at once than the pool holds streams for
  }
  cudaStream_t s = nullptr; // created with `device` current: the caller's device_scope
  if (auto rc = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking); rc != cudaSuccess)
    return make_error(errc::unavailable, "cudaStreamCreateWithFlags on cuda:" +
                                             std::to_string(device) + ": " + error_text(rc));
  all_.emplace_back(device, s);
  return s;
}

void stream_pool::release(int device, cudaStream_t s) {
  {
    std::lock_guard guard{mutex_};
    free_.emplace_back(device, s);
  }
  freed_.notify_one();
}

caf::error stream_pool::copy(void* dst, const void* src, uint64_t bytes, int device) {
  device_scope scope{device};
  if (scope.error())
    return scope.error();
  auto s = acquire(device);
  if (!s)
    return std::move(s.error());
  auto rc = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, *s);
  if (rc == cudaSuccess)
    rc = cudaStreamSynchronize(*s);
  release(device, *s);
  if (rc != cudaSuccess)
    return make_error(errc::io_error, "copy of " + std::to_string(bytes) + " bytes on cuda:" +
                                          std::to_string(device) + ": " + error_text(rc));
  return caf::none;
}

ipc_mapping::~ipc_mapping() {
  if (base == nullptr)
    return;
  device_scope scope{device};
  (void)cudaIpcCloseMemHandle(base);
}

caf::expected<std::shared_ptr<ipc_mapping>> open_ipc(const device_export& d) {
  if (!d.exportable)
    return make_error(errc::unavailable,
                      "the region's GPU allocation was not exported for CUDA IPC by its owner "
                      "(not cudaMalloc memory, or cudaIpcGetMemHandle failed there)");
  // Ordinals differ between processes (CUDA_VISIBLE_DEVICES): the PCI address does not.
  int device = -1;
  const auto pci = pci_text(d.pci);
  if (auto rc = cudaDeviceGetByPCIBusId(&device, pci.c_str()); rc != cudaSuccess)
    return make_error(errc::unavailable,
                      "the peer's GPU " + pci + " is not visible here: " + error_text(rc));
  device_scope scope{device};
  if (scope.error())
    return scope.error();
  cudaIpcMemHandle_t handle;
  static_assert(sizeof(handle) == ipc_handle_bytes);
  std::memcpy(&handle, d.ipc_handle.data(), sizeof(handle));
  void* p = nullptr;
  if (auto rc = cudaIpcOpenMemHandle(&p, handle, cudaIpcMemLazyEnablePeerAccess); rc != cudaSuccess)
    return make_error(errc::unavailable, "cudaIpcOpenMemHandle on cuda:" + std::to_string(device) +
                                             ": " + error_text(rc));
  auto m = std::make_shared<ipc_mapping>();
  m->base = static_cast<std::byte*>(p);
  m->device = device;
  return m;
}

} // namespace crescent::transport::cuda
