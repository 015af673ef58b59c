#include "transport/host_memory.hpp"

#include "messages/errors.hpp"
#include "transport/sealed_file.hpp"
#include "transport/shared_segment.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace crescent::transport {

host_memory::host_memory(host_memory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), length_(std::exchange(other.length_, 0)),
      mapped_(std::exchange(other.mapped_, 0)), fd_(std::exchange(other.fd_, -1)),
      segment_id_(std::exchange(other.segment_id_, 0)) {}

host_memory& host_memory::operator=(host_memory&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    length_ = std::exchange(other.length_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
    fd_ = std::exchange(other.fd_, -1);
    segment_id_ = std::exchange(other.segment_id_, 0);
  }
  return *this;
}

host_memory::~host_memory() {
  release();
}

void host_memory::release() noexcept {
  if (data_ != nullptr) {
    forget_segment(segment_id_);
    munmap(data_, mapped_);
  }
  if (fd_ >= 0)
    close(fd_);
  data_ = nullptr;
  fd_ = -1;
}

caf::expected<host_memory> host_memory::allocate(uint64_t length_bytes, touch when) {
  if (length_bytes == 0)
    return make_error(errc::invalid_argument, "cannot map a region of zero bytes");
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapped = (length_bytes + page - 1) / page * page;
  auto fail = [&](const char* what) {
    return caf::expected<host_memory>{
        make_error(errc::no_space, std::string{what} + " of " + std::to_string(mapped) +
                                       " bytes failed: " + std::strerror(errno))};
  };
  host_memory result;
  auto fd = sealed_memfd("crescent-region", mapped);
  if (!fd)
    return std::move(fd.error());
  result.fd_ = *fd;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, result.fd_, 0);
  if (p == MAP_FAILED)
    return fail("mmap");
  result.data_ = static_cast<std::byte*>(p);
  result.length_ = length_bytes;
  result.mapped_ = mapped;
  if (when == touch::up_front)
    for (uint64_t off = 0; off < mapped; off += page)
      result.data_[off] = std::byte{0};
  result.segment_id_ = remember_segment(result.data_, mapped, result.fd_);
  return result;
}

} // namespace crescent::transport
