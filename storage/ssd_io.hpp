// Positional file I/O of the SSD tier: io_uring when the kernel offers it, pread/pwrite when not.
// Short transfers are continued; errors keep errno's meaning (ENOSPC -> no_space).
#pragma once

#include <caf/error.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace crescent::storage {

class file_io {
 public:
  /// io_uring if `prefer_uring` and the kernel allows it, else pread/pwrite.
  static std::unique_ptr<file_io> make(int fd, bool prefer_uring);
  virtual ~file_io() = default;
  virtual caf::error write_at(uint64_t offset, std::span<const std::byte> bytes) = 0;
  virtual caf::error read_at(uint64_t offset, std::span<std::byte> bytes) = 0;
  virtual const char* name() const = 0;
};

} // namespace crescent::storage
