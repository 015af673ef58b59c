// The connection's sending side: the sender thread's loop, and the bursts it (or flush(), on
// the submitter's thread) writes.
#include "messages/errors.hpp"
#include "messages/xxh3.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/thread_name.hpp"
#include "transport/trace_points.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <cassert>

namespace crescent::transport::tcp {

void connection::send_loop() {
  auto fd = connect_to(host_, port_, connect_timeout_, &abandon_connect_);
  {
    std::lock_guard guard{mutex_};
    if (fd) {
      fd_ = *fd;
      connected_ = true;
      if (stopping_)
        shutdown(fd_, SHUT_RDWR);
    }
  }
  if (!fd) {
    fail_all(make_error(errc::unavailable,
                        "node " + std::to_string(node_) + ": " + describe(fd.error())));
    return;
  }
  receiver_ = named_thread("tcp-receive", [this] { receive_loop(); });
  burst_t burst;
  std::vector<std::byte> unsent;
  for (;;) {
    burst.clear();
    unsent.clear();
    {
      std::unique_lock guard{mutex_};
      changed_.wait(guard, [&] {
        return stopping_ || broken_ ||
               (!sending_ && (!unsent_.empty() || (!queue_.empty() && !window_full_)));
      });
      if (stopping_ || broken_)
        return;
      unsent.swap(unsent_); // requests flush() began: they go first
      if (!window_full_)
        take_burst(burst, false);
      sending_ = true;
    }
    CRESCENT_TRACE(burst_started, burst.size());
    iovec rest{unsent.data(), unsent.size()};
    if (!unsent.empty() && write_all(fd_, &rest, 1))
      shutdown(fd_, SHUT_RDWR); // the receiver fails everything in flight
    // Even after a failed write: the burst's slices must go in flight, where the receiver
    // fails them, or they would be nowhere.
    late_slices late;
    if (!burst.empty())
      late = send_burst(burst, false);
    CRESCENT_TRACE(burst_written, burst.size());
    {
      std::lock_guard guard{mutex_};
      sending_ = false;
    }
    for (auto& [s, why] : late)
      complete_slice(*s, std::move(why));
  }
}

// Everything queued goes out in one system call, up to the window and the burst's limits;
// with `reads_only`, up to the first request with a payload. Called with mutex_ held.
void connection::take_burst(burst_t& burst, bool reads_only) {
  uint64_t payload_bytes = 0;
  while (!queue_.empty() && burst.size() < burst_slices_max &&
         in_flight_.size() + burst.size() < window_slices &&
         (!reads_only || queue_.front()->kind == op_kind::read)) {
    const uint64_t payload = queue_.front()->kind == op_kind::write ? queue_.front()->length : 0;
    if (!burst.empty() && payload_bytes + payload > burst_payload_bytes_max)
      break;
    payload_bytes += payload;
    burst.push_back({queue_.front(), false});
    queue_.pop_front();
  }
  // The server holds write acknowledgements while more requests are buffered (tcp_server.cpp).
  // Behind the last slice of a batch it sends them at once: the batch is complete there, and
  // its owner need not wait for another batch's writes streaming in behind it (with two
  // submitters, both batches would otherwise end together, and the stream would drain
  // between rounds). Where the queue is too long to look through, no slice is marked: more
  // follow. Nor is one of a batch still launching: the rest of it may not be queued yet.
  if (queue_.size() > window_slices)
    return;
  std::vector<const batch_state*> later; // batches with a slice further on
  later.reserve(queue_.size() + burst.size());
  for (auto* s : queue_)
    later.push_back(s->batch);
  for (size_t i = burst.size(); i-- > 0;) {
    const auto* b = burst[i].slice->batch;
    burst[i].ends_batch =
        !b->launching.load() && std::find(later.begin(), later.end(), b) == later.end();
    later.push_back(b);
  }
}

namespace {

// A write's payload as it goes out: the source's bytes, or (an injected corruption) the
// source's bytes around a changed copy of its window, so that what arrives is changed and the
// source is not. A checksummed write then fails its check at the receiver, which hashes what
// arrived against the source's hash, as it would for a packet changed on the wire.
struct write_payload {
  std::array<iovec, 3> parts{};
  size_t count = 0;
  std::array<std::byte, 8> changed{};
};

// In place: a part may point into `p` itself.
void fill_payload(write_payload& p, const slice_record& s) {
  auto add = [&](const std::byte* bytes, uint64_t length) {
    if (length > 0)
      p.parts[p.count++] = {const_cast<std::byte*>(bytes), static_cast<size_t>(length)};
  };
  if (s.fault != slice_fault::corrupt)
    return add(s.local, s.length);
  const auto w = corrupt_window_of(s.length);
  auto changed = corrupted_window(s.local, s.length, s.local_location);
  assert(changed); // host memory: TCP carries no other
  p.changed = *changed;
  add(s.local, w.at);
  add(p.changed.data(), w.length);
  add(s.local + w.at + w.length, s.length - w.at - w.length);
}

} // namespace

connection::late_slices connection::send_burst(const burst_t& burst, bool from_caller) {
  // Everything the write needs is taken from the slices now: once in flight, a slice may
  // complete (and its record go) at any moment, before the write below even starts.
  std::vector<request_header> headers(burst.size());
  std::vector<write_payload> payloads(burst.size());
  for (size_t i = 0; i < burst.size(); ++i) {
    auto& s = *burst[i].slice;
    auto& req = headers[i];
    req.kind = s.kind == op_kind::read ? kind_read : kind_write;
    req.flags = (s.checksum ? flag_checksum : 0) |
                (s.kind == op_kind::write && burst[i].ends_batch ? flag_ack_now : 0);
    req.region_id = s.remote.region_id;
    req.access_key = s.remote.access_key;
    req.handle_offset = s.remote.offset;
    req.handle_length = s.remote.length;
    req.offset = s.remote_offset;
    req.length = s.length;
    if (s.checksum && s.kind == op_kind::write)
      req.checksum = s.known_checksum ? *s.known_checksum : xxh3_64(s.local, s.length);
    if (s.kind == op_kind::write)
      fill_payload(payloads[i], s);
  }
  late_slices late; // ended by the caller, once it no longer holds the socket
  std::vector<iovec> iov;
  iov.reserve(4 * burst.size());
  {
    std::lock_guard guard{mutex_};
    const bool lost = broken_ || stopping_; // fail_all ran while these were off the queue
    // Checked under the lock that expire() takes after the watchdog sets `expired`: a slice
    // either meets the flag here or is in flight when expire() looks, and is cut off there.
    for (size_t i = 0; i < burst.size(); ++i) {
      auto* s = burst[i].slice;
      if (lost)
        late.emplace_back(
            s, make_error(errc::io_error, "connection to node " + std::to_string(node_) + " lost"));
      else if (s->batch->expired.load())
        late.emplace_back(s, deadline_passed());
      else if (s->batch->cancelled.load())
        late.emplace_back(s, make_error(errc::cancelled, "cancelled before it was sent"));
      else {
        headers[i].request_id = next_request_++;
        in_flight_.emplace(headers[i].request_id, s);
        if ((headers[i].flags & flag_ack_now) != 0)
          test_hooks::acks_requested.fetch_add(1, std::memory_order_relaxed);
        iov.push_back({&headers[i], sizeof(request_header)});
        if (headers[i].kind == kind_write)
          for (size_t k = 0; k < payloads[i].count; ++k)
            iov.push_back(payloads[i].parts[k]);
      }
    }
    window_full_ = in_flight_.size() >= window_slices;
  }
  if (iov.empty())
    return late;
  // On failure the receiver fails everything in flight, these included.
  if (!from_caller) {
    if (write_all(fd_, iov.data(), static_cast<int>(iov.size())))
      shutdown(fd_, SHUT_RDWR);
    return late;
  }
  // The caller's thread must not block on a peer that reads slowly, or not at all: what the
  // socket does not take at once (only headers: reads carry no payload) is left to the sender,
  // which writes it before anything else (`sending_` keeps everyone else off the socket).
  test_hooks::inline_sends.fetch_add(1, std::memory_order_relaxed);
  auto sent = send_now(fd_, iov, test_hooks::inline_send_bytes_max.load(std::memory_order_relaxed));
  if (!sent) {
    shutdown(fd_, SHUT_RDWR);
    return late;
  }
  auto rest = bytes_after(iov, *sent);
  if (rest.empty())
    return late;
  test_hooks::handed_to_sender.fetch_add(1, std::memory_order_relaxed); // rare: socket full
  std::lock_guard guard{mutex_};
  unsent_ = std::move(rest);
  return late;
}

} // namespace crescent::transport::tcp
