#include "actors/common/bounded_shutdown.hpp"

#include <fmt/format.h>

#include <future>
#include <thread>

namespace crescent {

namespace {

std::atomic<bool> left{false};

} // namespace

void end_actor_system(owned_actor_system s, std::chrono::milliseconds limit) {
  auto owned = std::make_shared<owned_actor_system>(std::move(s));
  std::promise<void> ended;
  auto done = ended.get_future();
  std::thread ender{[owned, ended = std::move(ended)]() mutable {
    owned->system.reset();
    owned->config.reset();
    ended.set_value();
  }};
  if (done.wait_for(limit) == std::future_status::ready) {
    ender.join();
    return;
  }
  fmt::print(stderr,
             "crescent: the actor system did not end within {} ms (a detached actor is still "
             "referenced after every actor terminated); leaving it to the process's end\n",
             limit.count());
  left = true;
  ender.detach();
}

bool actor_system_left() {
  return left;
}

} // namespace crescent
