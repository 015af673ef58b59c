#include "actors/common/actor_system_setup.hpp"

#include "messages/registration.hpp"

#include <caf/atom.hpp>
#include <caf/io/middleman.hpp>

namespace crescent {

void setup_actor_system(caf::actor_system_config& cfg, bool networked) {
  register_types(cfg);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  if (networked) {
    cfg.load<caf::io::middleman>();
    // Messages from other processes are deserialized on the multiplexer thread that read them,
    // not handed to a BASP worker on the scheduler first: one thread wake-up less per message
    // each way (CAF's default is one worker on machines of under 8 cores).
    cfg.set("middleman.workers", size_t{0});
  }
}

} // namespace crescent
