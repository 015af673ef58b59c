// Every process that runs Crescent actors calls register_types on its actor_system_config
// before creating the actor system. A type missing here does not fail loudly in CAF 0.17: the
// message arrives empty, or offline serialization writes nothing. tests/messages checks that
// every type round-trips.
#pragma once

#include <caf/actor_system_config.hpp>

namespace crescent {

/// Registers every typed_envelope (envelope_schemas.hpp), each under its own name, and the
/// error category. A bare `envelope` is not registered: every message between processes names
/// its schema in its type.
void register_types(caf::actor_system_config& cfg);

} // namespace crescent
