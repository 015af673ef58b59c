// The connection's life: its threads, the queue that enqueue() and flush() feed, and its end
// (stop, expire, fail_all). Sending and receiving are in tcp_connection_send.cpp and
// tcp_connection_receive.cpp.
#include "transport/tcp/tcp_connection.hpp"

#include "messages/errors.hpp"
#include "transport/thread_name.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

namespace crescent::transport::tcp {

connection::connection(std::string host, uint16_t port, uint32_t node,
                       std::chrono::milliseconds timeout)
    : host_(std::move(host)), port_(port), node_(node), connect_timeout_(timeout) {
  sender_ = named_thread("tcp-send", [this] { send_loop(); });
}

connection::~connection() {
  stop();
}

void connection::stop() {
  {
    std::lock_guard guard{mutex_};
    if (stopping_)
      return;
    stopping_ = true;
    abandon_connect_ = true;
    if (fd_ >= 0)
      shutdown(fd_, SHUT_RDWR);
  }
  changed_.notify_all();
  if (sender_.joinable())
    sender_.join();
  if (receiver_.joinable())
    receiver_.join();
  fail_all(make_error(errc::unavailable, "the transfer engine is stopping"));
  std::unique_lock guard{mutex_};
  // A flush() that took requests before `stopping_` may still be writing them (rare: a batch
  // submitted while the engine stops): the socket must not close, and its number be reused,
  // under it.
  send_done_.wait(guard, [&] { return !sending_; });
  if (fd_ >= 0)
    close(fd_);
  fd_ = -1;
}

bool connection::broken() const {
  std::lock_guard guard{mutex_};
  return broken_ || stopping_;
}

bool connection::enqueue(slice_record& s) {
  bool late = false;
  bool held = false;
  {
    std::lock_guard guard{mutex_};
    if (broken_ || stopping_)
      return false;
    // Checked under the lock that expire() takes after the watchdog sets `expired`: a slice
    // either meets the flag here or is on the queue when expire() looks.
    late = s.batch->expired.load();
    // Likewise for `launching`, which the submitter clears before flush() takes the lock: a
    // slice held back here is on the queue when flush() looks. Past a window's worth the
    // sender starts at once: a large batch's first bytes need not wait for all of it to launch.
    held = s.batch->launching.load() && queue_.size() < window_slices;
    if (!late)
      queue_.push_back(&s);
  }
  if (late) {
    complete_slice(s, deadline_passed());
    return true;
  }
  if (!held)
    changed_.notify_all();
  return true;
}

void connection::flush() {
  burst_t burst;
  {
    std::lock_guard guard{mutex_};
    if (queue_.empty())
      return;
    if (connected_ && !sending_ && !broken_ && !stopping_ && !window_full_ && unsent_.empty())
      take_burst(burst, true);
    if (!burst.empty())
      sending_ = true; // else it is the sender's, sending or not
  }
  if (!burst.empty()) {
    auto late = send_burst(burst, true);
    bool more = false;
    {
      std::lock_guard guard{mutex_};
      sending_ = false;
      more = !queue_.empty() || !unsent_.empty();
    }
    send_done_.notify_all();
    // Slices of other batches that ended meanwhile end here, on this thread, but not while it
    // holds the socket: their callbacks may submit again.
    for (auto& [s, why] : late)
      complete_slice(*s, std::move(why));
    if (!more)
      return;
  }
  changed_.notify_all();
}

void connection::expire(const batch_state& b) {
  std::vector<slice_record*> late;
  {
    std::lock_guard guard{mutex_};
    auto ours = [&](slice_record* s) { return s->batch == &b; };
    // Queued slices never went out: they end here, and the connection (perhaps still
    // connecting) stays.
    for (auto i = queue_.begin(); i != queue_.end();)
      if (ours(*i)) {
        late.push_back(*i);
        i = queue_.erase(i);
      } else {
        ++i;
      }
    const bool hit = std::any_of(in_flight_.begin(), in_flight_.end(),
                                 [&](auto& kv) { return ours(kv.second); }) ||
                     (receiving_ != nullptr && ours(receiving_));
    // Cutting the connection is the only way to stop a receive into the initiator's buffer.
    if (hit && fd_ >= 0)
      shutdown(fd_, SHUT_RDWR);
  }
  for (auto* s : late)
    complete_slice(*s, deadline_passed());
}

void connection::fail_all(const caf::error& reason, slice_record* also) {
  std::vector<slice_record*> doomed;
  if (also != nullptr)
    doomed.push_back(also);
  {
    std::lock_guard guard{mutex_};
    broken_ = true;
    doomed.insert(doomed.end(), queue_.begin(), queue_.end());
    for (auto& kv : in_flight_)
      doomed.push_back(kv.second);
    queue_.clear();
    in_flight_.clear();
  }
  changed_.notify_all();
  for (auto* s : doomed)
    complete_slice(*s, reason);
}

} // namespace crescent::transport::tcp
