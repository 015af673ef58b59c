// Which failed handshakes remote_actor_of asks again (actors/common/remote_connect.hpp).
#include "actors/common/actor_system_setup.hpp"
#include "actors/common/remote_connect.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/sec.hpp>
#include <gtest/gtest.h>

#include <chrono>

namespace crescent::testing {
namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

caf::actor_system_config& config_with(connection_liveness liveness) {
  static caf::actor_system_config heartbeats = [] {
    caf::actor_system_config c;
    setup_actor_system(c, true, {milliseconds{1000}, milliseconds{30000}});
    return c;
  }();
  static caf::actor_system_config none = [] {
    caf::actor_system_config c;
    setup_actor_system(c, true, {milliseconds{0}, milliseconds{0}});
    return c;
  }();
  return liveness.heartbeat.count() > 0 ? heartbeats : none;
}

TEST(remote_connect, a_handshake_cut_short_is_asked_again_within_the_connection_timeout) {
  caf::actor_system sys{config_with({milliseconds{1000}, milliseconds{30000}})};
  EXPECT_EQ(connection_silence_limit(sys), milliseconds{30000});
  const auto now = steady::now();
  EXPECT_TRUE(handshake_again(sys, caf::sec::connection_timeout, now, 1));
  EXPECT_TRUE(handshake_again(sys, caf::sec::disconnect_during_handshake, now, 1));
  EXPECT_TRUE(handshake_again(sys, caf::sec::connection_timeout, now, remote_handshakes_max - 1));
  // Past the limit of tries or of time: the error is the answer.
  EXPECT_FALSE(handshake_again(sys, caf::sec::connection_timeout, now, remote_handshakes_max));
  EXPECT_FALSE(handshake_again(sys, caf::sec::connection_timeout, now - milliseconds{30001}, 1));
  // Nothing listening, or not the actor asked for: at once.
  EXPECT_FALSE(handshake_again(sys, caf::sec::cannot_connect_to_node, now, 1));
  EXPECT_FALSE(handshake_again(sys, caf::sec::unexpected_actor_messaging_interface, now, 1));
}

TEST(remote_connect, without_heartbeats_a_handshake_cut_short_is_asked_again_twice) {
  caf::actor_system sys{config_with({milliseconds{0}, milliseconds{0}})};
  EXPECT_EQ(connection_silence_limit(sys), milliseconds{0});
  const auto long_ago = steady::now() - std::chrono::hours(1);
  EXPECT_TRUE(handshake_again(sys, caf::sec::connection_timeout, long_ago, 1));
  EXPECT_TRUE(handshake_again(sys, caf::sec::connection_timeout, long_ago, 2));
  EXPECT_FALSE(handshake_again(sys, caf::sec::connection_timeout, long_ago, 3));
}

} // namespace
} // namespace crescent::testing
