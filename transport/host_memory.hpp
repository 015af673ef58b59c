// Page-aligned host memory for registered regions, shareable with other processes on the host.
//
// Each allocation is one memfd (an anonymous file) mapped shared, so that a process on the same
// host can map the same pages through /proc/<pid>/fd/<fd> and copy into them directly (the shm
// path of the transfer engine). The memory is touched once up front, so that first-touch page
// faults (7-14 us per 4 KiB here) never land inside a transfer; simulated time, which never
// times a real copy, maps it untouched (touch::on_use) and pays for the pages it uses only.
// Allocations register themselves in the process's segment directory (shared_segment.hpp) for as
// long as they live.
#pragma once

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace crescent::transport {

enum class touch : uint8_t {
  up_front, // every page faulted in by allocate()
  on_use,   // by the first access, as the kernel does
};

class host_memory {
 public:
  host_memory() = default;
  host_memory(host_memory&& other) noexcept;
  host_memory& operator=(host_memory&& other) noexcept;
  host_memory(const host_memory&) = delete;
  host_memory& operator=(const host_memory&) = delete;
  ~host_memory();

  /// Maps `length_bytes` (rounded up to whole pages) of zeroed shared memory.
  static caf::expected<host_memory> allocate(uint64_t length_bytes, touch when = touch::up_front);

  std::byte* data() const { return data_; }
  uint64_t size_bytes() const { return length_; }
  std::span<std::byte> bytes() const { return {data_, length_}; }
  int fd() const { return fd_; }
  uint64_t segment_id() const { return segment_id_; }

 private:
  void release() noexcept;

  std::byte* data_ = nullptr;
  uint64_t length_ = 0;
  uint64_t mapped_ = 0;
  int fd_ = -1;
  uint64_t segment_id_ = 0;
};

} // namespace crescent::transport
