#include "transport/shared_segment.hpp"

#include <sys/stat.h>

#include <map>
#include <mutex>

namespace crescent::transport {

namespace {

struct segment {
  uint64_t id;
  uint64_t length;
  int fd;
  uint64_t inode;
};

struct directory {
  std::mutex mutex;
  std::map<const std::byte*, segment> by_base; // ordered: the segment below an address
  uint64_t next_id = 1;
};

directory& segments() {
  static directory dir;
  return dir;
}

} // namespace

uint64_t remember_segment(std::byte* base, uint64_t length, int fd) {
  auto& d = segments();
  std::lock_guard guard{d.mutex};
  const uint64_t id = d.next_id++;
  struct stat st {};
  const uint64_t inode = fstat(fd, &st) == 0 ? static_cast<uint64_t>(st.st_ino) : 0;
  d.by_base[base] = segment{id, length, fd, inode};
  return id;
}

void forget_segment(uint64_t segment_id) {
  auto& d = segments();
  std::lock_guard guard{d.mutex};
  for (auto i = d.by_base.begin(); i != d.by_base.end(); ++i)
    if (i->second.id == segment_id) {
      d.by_base.erase(i);
      return;
    }
}

std::optional<segment_ref> find_segment(const std::byte* base, uint64_t length) {
  auto& d = segments();
  std::lock_guard guard{d.mutex};
  auto i = d.by_base.upper_bound(base);
  if (i == d.by_base.begin())
    return std::nullopt;
  --i;
  const uint64_t offset = static_cast<uint64_t>(base - i->first);
  if (offset > i->second.length || length > i->second.length - offset)
    return std::nullopt;
  return segment_ref{i->second.id, i->second.fd, i->second.inode, offset};
}

} // namespace crescent::transport
