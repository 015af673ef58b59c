// The in-process path: the remote region is this engine's own, so a slice is a checked memcpy
// under a pin that keeps the region registered meanwhile.
#include "messages/errors.hpp"
#include "transport/device_memory.hpp"
#include "transport/engine_internal.hpp"

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <cstring>

namespace crescent::transport {

namespace {

class local_backend final : public backend {
 public:
  explicit local_backend(transfer_engine::impl& engine) : engine_(engine) {}

  const char* name() const override { return "local"; }

  void start(slice_record& s) override {
    if (injected_failure(s))
      return;
    auto remote = engine_.table->pin(s.remote, s.remote_offset, s.length);
    if (!remote)
      return complete_slice(s, std::move(remote.error()));
    auto err = copy_slice(s, *remote);
    engine_.table->unpin(s.remote);
    complete_slice(s, std::move(err));
  }

 private:
  transfer_engine::impl& engine_;
};

} // namespace

caf::error copy_slice(slice_record& s, std::byte* remote) {
  std::byte* dst = s.kind == op_kind::read ? s.local : remote;
  const std::byte* src = s.kind == op_kind::read ? remote : s.local;
  const uint64_t before = s.checksum ? XXH3_64bits(src, s.length) : 0;
  std::memcpy(dst, src, s.length);
  if (s.fault == slice_fault::corrupt)
    corrupt_bytes(dst, s.length);
  if (s.checksum && XXH3_64bits(dst, s.length) != before)
    return make_error(errc::checksum_mismatch, "slice changed while being copied");
  return caf::none;
}

void corrupt_bytes(std::byte* bytes, uint64_t length) {
  // Eight bytes at the middle: whatever the element type, some value changes a lot (a float's
  // exponent byte among them), as a corrupted packet would.
  for (uint64_t k = length / 2; k < length && k < length / 2 + 8; ++k)
    bytes[k] ^= std::byte{0x5a};
}

caf::error corrupt_landed(std::byte* bytes, uint64_t length, memory_location where) {
  if (!where.is_gpu()) {
    corrupt_bytes(bytes, length);
    return caf::none;
  }
  // GPU memory: the same bytes, through the host (the cuda path and GPUDirect RDMA reads only).
  std::array<std::byte, 8> window{};
  const uint64_t at = length / 2;
  const uint64_t n = std::min<uint64_t>(window.size(), length - at);
  if (n == 0)
    return caf::none;
  if (auto err = copy_and_wait(window.data(), bytes + at, n, where.device))
    return err;
  for (uint64_t k = 0; k < n; ++k)
    window[k] ^= std::byte{0x5a}; // as corrupt_bytes: the window is the slice's middle
  return copy_and_wait(bytes + at, window.data(), n, where.device);
}

std::unique_ptr<backend> make_local_backend(transfer_engine::impl& engine) {
  return std::make_unique<local_backend>(engine);
}

} // namespace crescent::transport
