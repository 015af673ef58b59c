#include "apps/pool/get_combiner.hpp"

#include <exception>
#include <string>

namespace crescent::pool {

caf::expected<std::vector<pool_protocol::block_location>>
get_combiner::locate(std::span<const block_key> keys, const ask_fn& ask) {
  if (keys.empty() || keys.size() > keys_max)
    return make_error(errc::invalid_argument, "a get names 1 to 4096 keys");
  waiter self{keys};
  std::unique_lock guard{mutex_};
  queue_.push_back(&self);
  while (!self.done) {
    if (in_flight_)
      answered_.wait(guard);
    else
      lead(guard, ask); // sends this thread's get too: it is queued
  }
  return std::move(self.result);
}

// Sends the queued gets (up to keys_max keys) as one Get, unlocked while it is at the master.
void get_combiner::lead(std::unique_lock<std::mutex>& guard, const ask_fn& ask) {
  std::vector<waiter*> batch;
  std::vector<block_key> keys;
  while (!queue_.empty() && keys.size() + queue_.front()->keys.size() <= keys_max) {
    auto* w = queue_.front();
    queue_.pop_front();
    keys.insert(keys.end(), w->keys.begin(), w->keys.end());
    batch.push_back(w);
  }
  in_flight_ = true;
  gets_ += batch.size();
  ++requests_;
  guard.unlock();
  // Whatever happens to the request, the waiters are answered and the next leader can go:
  // an exception here would leave in_flight_ set and every later get of the process waiting.
  auto found = [&]() -> caf::expected<std::vector<pool_protocol::block_location>> {
    try {
      auto reply = ask(pool_protocol::make_get(keys, false));
      if (!reply)
        return std::move(reply.error());
      return pool_protocol::read_get_reply(*reply);
    } catch (const std::exception& e) {
      return make_error(errc::internal, std::string{"get failed: "} + e.what());
    }
  }();
  if (found && found->size() != keys.size())
    found = make_error(errc::malformed_message, "get answer does not match the request");
  guard.lock();
  size_t at = 0;
  for (auto* w : batch) {
    if (found)
      w->result = std::vector<pool_protocol::block_location>(
          found->begin() + static_cast<ptrdiff_t>(at),
          found->begin() + static_cast<ptrdiff_t>(at + w->keys.size()));
    else
      w->result = found.error();
    at += w->keys.size();
    w->done = true;
  }
  in_flight_ = false;
  answered_.notify_all(); // the answered leave; one of the others leads next
}

uint64_t get_combiner::gets() const {
  std::lock_guard guard{mutex_};
  return gets_;
}

size_t get_combiner::queued() const {
  std::lock_guard guard{mutex_};
  return queue_.size();
}

uint64_t get_combiner::requests() const {
  std::lock_guard guard{mutex_};
  return requests_;
}

} // namespace crescent::pool
