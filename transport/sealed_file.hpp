// Shared-memory files that other processes on the host map: memfds sealed against shrinking and
// growing once sized. A mapped page past the end of a file faults (SIGBUS) when touched, so a
// process that maps another's file must know that the file cannot shrink under it; the seal
// says so, and readers check it before they map.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace crescent::transport {

/// A new memfd of `bytes` (close-on-exec), sealed against shrinking, growing and more seals.
caf::expected<int> sealed_memfd(const char* name, uint64_t bytes);

/// Another process's shared file, opened through /proc/<pid>/fd/<n>.
struct peer_file {
  int fd = -1;        // the caller's to close
  uint64_t bytes = 0; // its size, which can no longer change
  uint64_t inode = 0;
  std::string path;
};

/// Opens file `n` of process `pid` (`flags`: O_RDONLY or O_RDWR) if it is sealed against
/// shrinking (checked before its size is read, so that the size holds); else unavailable with
/// the reason.
caf::expected<peer_file> open_peer_file(int32_t pid, int32_t n, int flags);

} // namespace crescent::transport
