// The in-process path: the remote region is this engine's own, so a slice is a checked memcpy
// under a pin that keeps the region registered meanwhile.
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"

#include <xxhash.h>

#include <cstring>

namespace crescent::transport {

caf::error copy_slice(slice_record& s, std::byte* remote, bool corrupt = false);

namespace {

class local_backend final : public backend {
 public:
  explicit local_backend(transfer_engine::impl& engine) : engine_(engine) {}

  const char* name() const override { return "local"; }

  void start(slice_record& s) override {
    const slice_fault fault = engine_.consult_fault_hook(s);
    if (fault == slice_fault::fail)
      return complete_slice(s, make_error(errc::io_error, "the slice failed (injected fault)"));
    auto remote = engine_.table->pin(s.remote, s.remote_offset, s.length);
    if (!remote)
      return complete_slice(s, std::move(remote.error()));
    auto err = copy_slice(s, *remote, fault == slice_fault::corrupt);
    engine_.table->unpin(s.remote);
    complete_slice(s, std::move(err));
  }

 private:
  transfer_engine::impl& engine_;
};

} // namespace

// Moves one slice between its local buffer and `remote` (already checked). With a checksum, the
// copy is verified by hashing source and destination. `corrupt` (an injected fault) changes
// bytes on the way, before the check.
caf::error copy_slice(slice_record& s, std::byte* remote, bool corrupt) {
  std::byte* dst = s.kind == op_kind::read ? s.local : remote;
  const std::byte* src = s.kind == op_kind::read ? remote : s.local;
  const uint64_t before = s.checksum ? XXH3_64bits(src, s.length) : 0;
  std::memcpy(dst, src, s.length);
  // Eight bytes at the middle: whatever the element type, some value changes a lot (a float's
  // exponent byte among them), as a corrupted packet would.
  if (corrupt)
    for (uint64_t k = s.length / 2; k < s.length && k < s.length / 2 + 8; ++k)
      dst[k] ^= std::byte{0x5a};
  if (s.checksum && XXH3_64bits(dst, s.length) != before)
    return make_error(errc::checksum_mismatch, "slice changed while being copied");
  return caf::none;
}

std::unique_ptr<backend> make_local_backend(transfer_engine::impl& engine) {
  return std::make_unique<local_backend>(engine);
}

} // namespace crescent::transport
