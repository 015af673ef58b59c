#include "transport/trace_points.hpp"

#include "messages/errors.hpp"

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace crescent::transport::trace {

namespace {

uint64_t now_nanoseconds() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000000u + static_cast<uint64_t>(t.tv_nsec);
}

// This process's ring, or null when CRESCENT_TRACE_DIR is not set. Never destroyed: threads may
// still record while the process exits.
ring* process_ring() {
  static ring* const r = []() -> ring* {
    const char* dir = std::getenv("CRESCENT_TRACE_DIR");
    if (dir == nullptr || *dir == '\0')
      return nullptr;
    static std::string path;
    path = std::string(dir) + "/trace." + std::to_string(getpid()) + ".txt";
    auto* made = new ring();
    std::atexit([] {
      if (auto err = process_ring()->write(path))
        std::fprintf(stderr, "crescent: trace points: %s\n", describe(err).c_str());
    });
    return made;
  }();
  return r;
}

} // namespace

ring::ring() : events_(new event[capacity]) {}

void ring::record(point tag, uint64_t value) {
  const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
  if (i >= capacity) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  events_[i] = event{now_nanoseconds(), value, sched_getcpu(), tag};
}

size_t ring::size() const {
  return std::min(next_.load(std::memory_order_relaxed), capacity);
}

caf::error ring::write(const std::string& path) const {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr)
    return make_error(errc::io_error, "cannot write " + path + ": " + std::strerror(errno));
  const size_t n = size();
  for (size_t i = 0; i < n; ++i)
    std::fprintf(f, "%llu %c %llu %d\n", static_cast<unsigned long long>(events_[i].nanoseconds),
                 static_cast<char>(events_[i].tag),
                 static_cast<unsigned long long>(events_[i].value), events_[i].cpu);
  if (std::fclose(f) != 0)
    return make_error(errc::io_error, "cannot write " + path + ": " + std::strerror(errno));
  return caf::none;
}

void record(point tag, uint64_t value) {
  if (auto* r = process_ring())
    r->record(tag, value);
}

} // namespace crescent::transport::trace
