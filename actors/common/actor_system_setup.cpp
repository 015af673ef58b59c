#include "actors/common/actor_system_setup.hpp"

#include "messages/registration.hpp"

#include <caf/atom.hpp>
#include <caf/io/middleman.hpp>

namespace crescent {

void setup_actor_system(caf::actor_system_config& cfg, bool networked) {
  register_types(cfg);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  if (networked)
    cfg.load<caf::io::middleman>();
}

} // namespace crescent
