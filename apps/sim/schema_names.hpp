// Names of the Cap'n Proto structs that envelopes carry, by schema id: how the message stream of
// a simulation names payloads (ScheduleRequest, TokenBatch, ...).
#pragma once

#include <cstdint>
#include <string>

namespace crescent::sim {

/// The struct's name, or its id in hex for a struct this table does not know.
std::string schema_name(uint64_t schema_id);

} // namespace crescent::sim
