// The conductor's time model for a cluster (actors/conductor/time_model.hpp): the modeled
// engine's profile; the reference engine's own modeled timing (flops over its rate); or, for
// the reference engine in real time, conductor.profile, by default the built-in profile of the
// reference engine measured on the build machine (`crescent profile`), which the conductor then
// corrects from the real prefill times it is told.
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "actors/conductor/time_model.hpp"

#include <caf/expected.hpp>

#include <memory>

namespace crescent {

/// The built-in profile of the reference engine on the build machine (data/profiles/).
inline constexpr const char* default_reference_profile = "reference-cpu";

/// Errors: a profile that cannot be loaded or does not describe the model, a failed fit.
caf::expected<std::shared_ptr<const time_model>> conductor_time_model(const cluster_config& cfg);

} // namespace crescent
