// Shared-memory files that other processes on the host map: memfds sealed against shrinking and
// growing once sized. A mapped page past the end of a file faults (SIGBUS) when touched, so a
// process that maps another's file must know that the file cannot shrink under it; the seal
// says so, and readers check it before they map.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>

namespace crescent::transport {

/// A new memfd of `bytes` (close-on-exec), sealed against shrinking, growing and more seals.
caf::expected<int> sealed_memfd(const char* name, uint64_t bytes);

/// Whether the file `fd` refers to can never shrink.
bool cannot_shrink(int fd);

} // namespace crescent::transport
