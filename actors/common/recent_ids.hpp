// The last ids an actor took, to know a message it took already: a network or a fault plan may
// deliver one message twice, and a second copy of a job must not run it again. A bounded window
// (the oldest id leaves first), so a copy later than `capacity` newer ids is not recognised.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_set>

namespace crescent {

class recent_ids {
 public:
  explicit recent_ids(size_t capacity) : capacity_(capacity) { assert(capacity > 0); }

  /// Remembers `id`; false if it is in the window already (a second copy).
  bool insert(uint64_t id) {
    if (!seen_.insert(id).second)
      return false;
    order_.push_back(id);
    if (order_.size() > capacity_) {
      seen_.erase(order_.front());
      order_.pop_front();
    }
    return true;
  }

  bool contains(uint64_t id) const { return seen_.count(id) != 0; }
  size_t size() const { return order_.size(); }

 private:
  size_t capacity_;
  std::deque<uint64_t> order_; // oldest first
  std::unordered_set<uint64_t> seen_;
};

} // namespace crescent
