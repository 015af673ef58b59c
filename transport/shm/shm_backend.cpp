// The shared-memory path between processes of one host: the initiator maps the owner's region
// table and the memfd segments its regions live in (through /proc/<pid>/fd), checks the handle
// against the table, and copies directly. The owner's code takes no part in the copy.
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace crescent::transport {

caf::error copy_slice(slice_record& s, std::byte* remote);

namespace {

constexpr size_t segments_per_peer_max = 4096;

struct segment_map {
  std::byte* base = nullptr;
  uint64_t bytes = 0;
  ~segment_map() {
    if (base != nullptr)
      munmap(base, bytes);
  }
};

struct shm_peer {
  peer_info info;
  std::unique_ptr<remote_region_table> table;
  std::mutex mutex;
  std::unordered_map<uint64_t, std::shared_ptr<segment_map>> segments; // by segment id
};

caf::expected<std::shared_ptr<segment_map>> open_segment(const shm_peer& peer,
                                                         const region_entry& e) {
  const std::string path =
      "/proc/" + std::to_string(peer.info.pid) + "/fd/" + std::to_string(e.segment_fd);
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0)
    return make_error(errc::unavailable, "cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != e.segment_inode) {
    close(fd);
    // The owner closed that segment and reused the descriptor: never copy into the wrong file.
    return make_error(errc::unavailable, path + " no longer holds the region's segment");
  }
  auto m = std::make_shared<segment_map>();
  m->bytes = static_cast<uint64_t>(st.st_size);
  // Populated at once: a first touch costs 7-14 us per 4 KiB page here, which would otherwise
  // land inside the first transfers into the segment.
  void* p = mmap(nullptr, m->bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED)
    return make_error(errc::unavailable, "cannot map " + path + ": " + std::strerror(errno));
  m->base = static_cast<std::byte*>(p);
  return m;
}

class shm_backend final : public backend {
 public:
  explicit shm_backend(transfer_engine::impl& engine) : engine_(engine) {}

  const char* name() const override { return "shm"; }

  caf::error add_peer(const peer_info& info) override {
    if (info.host_id != engine_.host_id)
      return make_error(errc::unavailable, "the peer runs on another host");
    if (info.table_fd < 0 || info.table_bytes == 0)
      return make_error(errc::unavailable, "the peer shares no region table");
    auto table = remote_region_table::open(info.pid, info.table_fd, info.table_bytes);
    if (!table)
      return std::move(table.error());
    auto p = std::make_shared<shm_peer>();
    p->info = info;
    p->table = std::move(*table);
    std::unique_lock guard{mutex_};
    for (auto n : info.nodes)
      peers_[n] = p;
    return caf::none;
  }

  void remove_peer(uint32_t node) override {
    std::unique_lock guard{mutex_};
    auto i = peers_.find(node);
    if (i == peers_.end())
      return;
    auto p = i->second;
    for (auto n : p->info.nodes)
      peers_.erase(n);
  }

  void start(slice_record& s) override {
    auto peer = find(s.remote.node);
    if (!peer)
      return complete_slice(s, make_error(errc::unavailable, "no shared-memory route"));
    auto e = peer->table->lookup(s.remote, s.remote_offset, s.length);
    if (!e)
      return complete_slice(s, std::move(e.error()));
    if (e->segment_id == 0)
      return complete_slice(s, make_error(errc::unavailable, "the region is not shared memory"));
    auto seg = segment(*peer, *e);
    if (!seg)
      return complete_slice(s, std::move(seg.error()));
    const uint64_t at = e->segment_offset + s.remote.offset + s.remote_offset;
    if (at > (*seg)->bytes || s.length > (*seg)->bytes - at)
      return complete_slice(s, make_error(errc::out_of_range, "region beyond its segment"));
    complete_slice(s, copy_slice(s, (*seg)->base + at));
  }

 private:
  std::shared_ptr<shm_peer> find(uint32_t node) {
    std::shared_lock guard{mutex_};
    auto i = peers_.find(node);
    return i == peers_.end() ? nullptr : i->second;
  }

  caf::expected<std::shared_ptr<segment_map>> segment(shm_peer& peer, const region_entry& e) {
    std::lock_guard guard{peer.mutex};
    if (auto i = peer.segments.find(e.segment_id); i != peer.segments.end())
      return i->second;
    auto m = open_segment(peer, e);
    if (!m)
      return m;
    // Segments of a long-lived peer come and go; forgetting all mappings now and then bounds
    // this cache (copies in flight keep theirs until they finish).
    if (peer.segments.size() >= segments_per_peer_max)
      peer.segments.clear();
    peer.segments.emplace(e.segment_id, *m);
    return m;
  }

  transfer_engine::impl& engine_;
  std::shared_mutex mutex_;
  std::unordered_map<uint32_t, std::shared_ptr<shm_peer>> peers_;
};

} // namespace

std::unique_ptr<backend> make_shm_backend(transfer_engine::impl& engine) {
  return std::make_unique<shm_backend>(engine);
}

} // namespace crescent::transport
