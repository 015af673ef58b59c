// The cuda path of a binary built without CUDA: there is none, and engines say why.
#include "messages/errors.hpp"
#include "transport/device_memory.hpp"
#include "transport/engine_internal.hpp"

namespace crescent::transport {

namespace {

constexpr const char* no_cuda = "this binary was built without CUDA (nvcc not found)";

} // namespace

caf::expected<std::unique_ptr<backend>> make_cuda_backend(transfer_engine::impl&) {
  return make_error(errc::unavailable, no_cuda);
}

caf::expected<device_export> export_device_memory(std::byte*, uint64_t, memory_location) {
  return make_error(errc::unavailable, no_cuda);
}

// No device_memory is ever allocated here: each one is empty.
device_memory::device_memory(device_memory&&) noexcept = default;
device_memory& device_memory::operator=(device_memory&&) noexcept = default;
device_memory::~device_memory() = default;

caf::expected<device_memory> device_memory::allocate(uint64_t, int) {
  return make_error(errc::unavailable, no_cuda);
}

caf::error copy_and_wait(void*, const void*, uint64_t, int) {
  return make_error(errc::unavailable, no_cuda);
}

} // namespace crescent::transport
