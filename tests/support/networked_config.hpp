// The actor system configuration of multi-process tests: Crescent's types and the middleman,
// as every `crescent` process has them. One per test program (CAF reads it at each start).
#pragma once

#include "actors/common/actor_system_setup.hpp"

#include <caf/actor_system_config.hpp>

namespace crescent::testing {

inline caf::actor_system_config& networked_config() {
  static caf::actor_system_config cfg = [] {
    caf::actor_system_config c;
    setup_actor_system(c, true);
    return c;
  }();
  return cfg;
}

} // namespace crescent::testing
