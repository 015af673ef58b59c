// The in-process path: the remote region is this engine's own, so a slice is a checked memcpy
// under a pin that keeps the region registered meanwhile.
#include "messages/errors.hpp"
#include "messages/xxh3.hpp"
#include "transport/device_memory.hpp"
#include "transport/engine_internal.hpp"

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
  // A write's known checksum is the caller's hash of `local`, its source.
  const uint64_t before = !s.checksum        ? 0
                          : s.known_checksum ? *s.known_checksum
                                             : xxh3_64(src, s.length);
  std::memcpy(dst, src, s.length);
  if (s.fault == slice_fault::corrupt)
    corrupt_bytes(dst, s.length);
  if (s.checksum && xxh3_64(dst, s.length) != before)
    return make_error(errc::checksum_mismatch, "slice changed while being copied");
  return caf::none;
}

namespace {

void flip(std::byte* bytes, uint64_t length) {
  for (uint64_t k = 0; k < length; ++k)
    bytes[k] ^= std::byte{0x5a};
}

} // namespace

// Whatever the element type, some value changes a lot (a float's exponent byte among them), as
// a corrupted packet would.
corrupt_window corrupt_window_of(uint64_t length) {
  const uint64_t at = length / 2;
  return {at, std::min<uint64_t>(8, length - at)};
}

void corrupt_bytes(std::byte* bytes, uint64_t length) {
  const auto w = corrupt_window_of(length);
  flip(bytes + w.at, w.length);
}

caf::expected<std::array<std::byte, 8>> corrupted_window(const std::byte* source, uint64_t length,
                                                         memory_location where) {
  const auto w = corrupt_window_of(length);
  std::array<std::byte, 8> bytes{};
  if (!where.is_gpu())
    std::memcpy(bytes.data(), source + w.at, w.length);
  else if (w.length > 0)
    if (auto err = copy_and_wait(bytes.data(), source + w.at, w.length, where.device))
      return err;
  flip(bytes.data(), w.length);
  return bytes;
}

caf::error corrupt_landed(std::byte* bytes, uint64_t length, memory_location where) {
  if (!where.is_gpu()) {
    corrupt_bytes(bytes, length);
    return caf::none;
  }
  // GPU memory: the same bytes, through the host (the cuda path and GPUDirect RDMA reads only).
  const auto w = corrupt_window_of(length);
  if (w.length == 0)
    return caf::none;
  auto changed = corrupted_window(bytes, length, where);
  if (!changed)
    return std::move(changed.error());
  return copy_and_wait(bytes + w.at, changed->data(), w.length, where.device);
}

std::unique_ptr<backend> make_local_backend(transfer_engine::impl& engine) {
  return std::make_unique<local_backend>(engine);
}

} // namespace crescent::transport
