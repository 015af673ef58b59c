// The process's directory of shared memory segments: which address ranges are backed by a
// memfd that another process on this host could map. The transfer engine consults it when a
// region is registered, to publish where that region's bytes live (segment, offset).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace crescent::transport {

struct segment_ref {
  uint64_t segment_id = 0; // unique for the life of the process; never reused
  int fd = -1;
  uint64_t inode = 0;  // of the memfd, so that a peer can check it opened the right file
  uint64_t offset = 0; // of the range within the segment
};

/// Records a mapping; returns its segment id.
uint64_t remember_segment(std::byte* base, uint64_t length, int fd);
void forget_segment(uint64_t segment_id);

/// The segment holding all of [base, base + length), if any.
std::optional<segment_ref> find_segment(const std::byte* base, uint64_t length);

} // namespace crescent::transport
