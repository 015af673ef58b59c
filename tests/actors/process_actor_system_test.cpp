// A real-time process's actor system ends, within its limit, whatever its ended actors left
// behind (actors/common/actor_system_setup.hpp).
#include "actors/common/actor_system_setup.hpp"
#include "actors/common/spawn_placement.hpp"

#include <caf/event_based_actor.hpp>
#include <caf/send.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace crescent::testing {
namespace {

// An actor with a thread of its own, and a timer pending when it ends.
caf::actor spawn_ticking(caf::actor_system& sys) {
  return spawn_placed(sys, true, [](caf::event_based_actor* self) -> caf::behavior {
    self->delayed_send(self, std::chrono::hours(1), std::string{"tick"});
    return {[](const std::string&) {}};
  });
}

TEST(process_actor_system, ends_an_ended_detached_actor_with_a_timer_pending) {
  ::testing::internal::CaptureStderr();
  {
    process_actor_system actors{false};
    caf::anon_send_exit(spawn_ticking(actors.get()), caf::exit_reason::user_shutdown);
  }
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("did not end"), std::string::npos) << err;
}

// CAF 0.17 would wait for ever here.
TEST(process_actor_system, goes_on_without_a_system_that_does_not_end_within_its_limit) {
  ::testing::internal::CaptureStderr();
  {
    process_actor_system actors{false};
    auto a = spawn_ticking(actors.get());
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    // A reference nobody ever gives back: the system cannot end, the process goes on.
    new caf::actor(a);
  }
  const auto err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the actor system did not end within 3 s"), std::string::npos) << err;
  EXPECT_NE(err.find(" #"), std::string::npos) << "it names the actor it waits for: " << err;
}

} // namespace
} // namespace crescent::testing
