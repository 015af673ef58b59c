#include "transport/host_memory.hpp"

#include "messages/errors.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace crescent::transport {

host_memory::host_memory(host_memory&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), length_(std::exchange(other.length_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

host_memory& host_memory::operator=(host_memory&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr)
      munmap(data_, mapped_);
    data_ = std::exchange(other.data_, nullptr);
    length_ = std::exchange(other.length_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

host_memory::~host_memory() {
  if (data_ != nullptr)
    munmap(data_, mapped_);
  data_ = nullptr;
}

caf::expected<host_memory> host_memory::allocate(uint64_t length_bytes) {
  if (length_bytes == 0)
    return make_error(errc::invalid_argument, "cannot map a region of zero bytes");
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapped = (length_bytes + page - 1) / page * page;
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    return make_error(errc::no_space, "mmap of " + std::to_string(mapped) +
                                          " bytes failed: " + std::strerror(errno));
  host_memory result;
  result.data_ = static_cast<std::byte*>(p);
  result.length_ = length_bytes;
  result.mapped_ = mapped;
  for (uint64_t off = 0; off < mapped; off += page)
    result.data_[off] = std::byte{0};
  return result;
}

} // namespace crescent::transport
