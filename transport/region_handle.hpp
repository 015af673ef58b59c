// A handle to registered memory: the capability that lets its holder move bytes in or out of
// exactly one byte range through the transfer engine. Handles travel inside Cap'n Proto
// messages (wire::RegionHandle); KV bytes never do.
#pragma once

#include "messages/schema/common.capnp.h"

#include <cstdint>
#include <string>

namespace crescent::transport {

struct region_handle {
  uint32_t node = 0;
  uint64_t region_id = 0; // 0 is never a registered region
  uint64_t offset = 0;    // bytes from the start of the region
  uint64_t length = 0;    // bytes
  uint64_t access_key = 0;

  bool valid() const { return region_id != 0; }

  /// The sub-range [offset + off, offset + off + len) of this handle. Asserts that it lies
  /// inside this handle: cutting handles is done by their owner, never from input.
  region_handle slice(uint64_t off, uint64_t len) const;

  friend bool operator==(const region_handle&, const region_handle&) = default;
};

std::string to_string(const region_handle& h);

void to_wire(const region_handle& h, wire::RegionHandle::Builder out);
region_handle from_wire(wire::RegionHandle::Reader in);

} // namespace crescent::transport
