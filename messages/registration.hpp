// Every process that runs Crescent actors calls register_types on its actor_system_config
// before creating the actor system. A type missing here does not fail loudly in CAF 0.17: the
// message arrives empty, or offline serialization writes nothing. tests/messages checks that
// every type round-trips.
#pragma once

#include <caf/actor_system_config.hpp>

namespace crescent {

/// Portable name of the envelope type, the same in every process.
inline constexpr const char* envelope_type_name = "crescent.envelope";

void register_types(caf::actor_system_config& cfg);

} // namespace crescent
