#include "transport/region_handle.hpp"

#include <cassert>

namespace crescent::transport {

region_handle region_handle::slice(uint64_t off, uint64_t len) const {
  assert(off <= length && len <= length - off && "slice outside its handle");
  region_handle result = *this;
  result.offset = offset + off;
  result.length = len;
  return result;
}

std::string to_string(const region_handle& h) {
  return "region{node " + std::to_string(h.node) + ", id " + std::to_string(h.region_id) +
         ", bytes [" + std::to_string(h.offset) + ", " + std::to_string(h.offset + h.length) + ")}";
}

void to_wire(const region_handle& h, wire::RegionHandle::Builder out) {
  out.setNode(h.node);
  out.setRegionId(h.region_id);
  out.setOffset(h.offset);
  out.setLength(h.length);
  out.setAccessKey(h.access_key);
}

region_handle from_wire(wire::RegionHandle::Reader in) {
  return region_handle{in.getNode(), in.getRegionId(), in.getOffset(), in.getLength(),
                       in.getAccessKey()};
}

} // namespace crescent::transport
