#include "actors/cluster/directory.hpp"

#include "messages/errors.hpp"

namespace crescent {

directory_cell::directory_cell(directory first) {
  snapshots_.push_back(std::make_unique<const directory>(std::move(first)));
  current_.store(snapshots_.back().get(), std::memory_order_release);
}

caf::error directory_cell::publish(directory next) {
  std::lock_guard guard{write_mutex_};
  return publish_locked(std::move(next));
}

caf::error directory_cell::publish_locked(directory next) {
  std::lock_guard guard{snapshots_mutex_};
  if (snapshots_.size() >= snapshots_max)
    return make_error(errc::limit_exceeded,
                      "the directory changed " + std::to_string(snapshots_max) +
                          " times in this process (bring-up and rejoins): restart the cluster");
  snapshots_.push_back(std::make_unique<const directory>(std::move(next)));
  current_.store(snapshots_.back().get(), std::memory_order_release);
  return caf::none;
}

size_t directory_cell::snapshots() const {
  std::lock_guard guard{snapshots_mutex_};
  return snapshots_.size();
}

} // namespace crescent
