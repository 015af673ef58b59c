#include "transport/host_peers.hpp"

#include "messages/errors.hpp"
#include "transport/sealed_file.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace crescent::transport {

namespace {

caf::expected<std::shared_ptr<segment_map>> open_segment(int32_t pid, const region_entry& e) {
  // Sealed, so that a truncation cannot fault this process's copies (SIGBUS).
  auto f = open_peer_file(pid, e.segment_fd, O_RDWR);
  if (!f)
    return std::move(f.error());
  const int fd = f->fd;
  const std::string& path = f->path;
  if (f->inode != e.segment_inode) {
    close(fd);
    // The owner closed that segment and reused the descriptor: never copy into the wrong file.
    return make_error(errc::unavailable, path + " no longer holds the region's segment");
  }
  auto m = std::make_shared<segment_map>();
  m->bytes = f->bytes;
  // Populated at once: a first touch costs 7-14 us per 4 KiB page here, which would otherwise
  // land inside the first transfers into the segment. On this VM that is half of it: the
  // hypervisor's own fault stays at this process's first write of each page (a first memcpy of
  // 512 KiB took 1.42 ms unpopulated, 0.73 ms populated, 0.03 ms once written; MADV_POPULATE_WRITE
  // did no better), so a writer is fast in memory it has written before.
  void* p = mmap(nullptr, m->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    return make_error(errc::unavailable, "cannot map " + path + ": " + std::strerror(errno));
  m->base = static_cast<std::byte*>(p);
  return m;
}

} // namespace

segment_map::~segment_map() {
  if (base != nullptr)
    munmap(base, bytes);
}

caf::expected<std::pair<std::shared_ptr<segment_map>, std::byte*>>
host_peer::host_bytes(const region_entry& e, const region_handle& h, uint64_t offset,
                      uint64_t length) {
  if (e.device.location.is_gpu() || e.segment_id == 0)
    return make_error(errc::unavailable, "the region is not shared host memory");
  std::shared_ptr<segment_map> seg;
  {
    std::lock_guard guard{mutex_};
    if (auto i = segments_.find(e.segment_id); i != segments_.end()) {
      seg = i->second;
    } else {
      auto m = open_segment(info.pid, e);
      if (!m)
        return std::move(m.error());
      // Segments of a long-lived peer come and go; forgetting all mappings now and then bounds
      // this cache (copies in flight keep theirs until they finish).
      if (segments_.size() >= segments_max)
        segments_.clear();
      seg = *m;
      segments_.emplace(e.segment_id, seg);
    }
  }
  const uint64_t at = e.segment_offset + h.offset + offset;
  if (at > seg->bytes || length > seg->bytes - at)
    return make_error(errc::out_of_range, "region beyond its segment");
  return std::make_pair(seg, seg->base + at);
}

caf::error host_peers::add(const std::string& host_id, const peer_info& info) {
  if (info.host_id != host_id)
    return make_error(errc::unavailable, "the peer runs on another host");
  if (info.table_fd < 0 || info.table_bytes == 0)
    return make_error(errc::unavailable, "the peer shares no region table");
  auto table = remote_region_table::open(info.pid, info.table_fd, info.table_bytes);
  if (!table)
    return std::move(table.error());
  auto p = std::make_shared<host_peer>();
  p->info = info;
  p->table = std::move(*table);
  std::unique_lock guard{mutex_};
  for (auto n : info.nodes)
    peers_[n] = p;
  return caf::none;
}

std::shared_ptr<host_peer> host_peers::remove(uint32_t node) {
  std::unique_lock guard{mutex_};
  auto i = peers_.find(node);
  if (i == peers_.end())
    return nullptr;
  auto p = i->second;
  for (auto n : p->info.nodes)
    peers_.erase(n);
  return p;
}

std::shared_ptr<host_peer> host_peers::find(uint32_t node) const {
  std::shared_lock guard{mutex_};
  auto i = peers_.find(node);
  return i == peers_.end() ? nullptr : i->second;
}

void host_peers::clear() {
  std::unique_lock guard{mutex_};
  peers_.clear();
}

} // namespace crescent::transport
