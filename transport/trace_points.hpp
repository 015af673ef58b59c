// Trace points: timestamped events from the TCP data plane's threads and the transfer
// benchmark, for finding where the time of a batch goes (docs/benchmarks-archive.md, seventh
// session; tools/trace_batches.py takes the files apart).
//
// Compiled in only with the CMake option CRESCENT_TRACE_POINTS (off by default: a point is then
// nothing at all, its arguments not even evaluated), and recorded only in a process started
// with CRESCENT_TRACE_DIR naming a directory. Such a process writes DIR/trace.<pid>.txt when it
// exits normally, one line per event: "nanoseconds tag value cpu", the time from
// CLOCK_MONOTONIC (comparable across the processes of one host). A process killed loses its
// events. At most ring::capacity events are kept; later ones are counted and dropped.
#pragma once

#include <caf/error.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

namespace crescent::transport::trace {

enum class point : char {
  submitted = 'S',     // the benchmark submits a batch (value: its thread)
  waited = 'W',        // its wait() returned (value: its thread)
  burst_started = 'a', // a TCP sender thread starts writing a burst (value: slices)
  burst_written = 'b', // and has written it
  request_read = 'h',  // the TCP server read a request header (value: its length)
  acks_sent = 'k',     // the TCP server sends held acknowledgements (value: how many)
  response_read = 'r', // a TCP receiver read a response header (value: its request id)
};

struct event {
  uint64_t nanoseconds = 0;
  uint64_t value = 0;
  int32_t cpu = -1;
  point tag = point::submitted;
};

/// A fixed number of events, recorded from any thread without a lock.
class ring {
 public:
  static constexpr size_t capacity = size_t{1} << 20;

  ring();
  void record(point tag, uint64_t value);
  /// Events recorded, at most capacity.
  size_t size() const;
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }
  const event& at(size_t i) const { return events_[i]; }
  /// The events as text (header comment above). Events recorded meanwhile may be missing.
  caf::error write(const std::string& path) const;

 private:
  std::unique_ptr<event[]> events_;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> dropped_{0};
};

/// Records into this process's ring, if CRESCENT_TRACE_DIR was set when it first ran.
void record(point tag, uint64_t value);

} // namespace crescent::transport::trace

#if CRESCENT_TRACE_POINTS
#define CRESCENT_TRACE(tag, value)                                                                 \
  ::crescent::transport::trace::record(::crescent::transport::trace::point::tag,                   \
                                       static_cast<uint64_t>(value))
#else
#define CRESCENT_TRACE(tag, value) ((void)0)
#endif
