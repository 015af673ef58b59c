// The CPUs the calling thread may run on: what the engine sizes its connections by, and what
// `bench transfer --cpus` splits and reports (apps/bench/cpu_sets.hpp).
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <vector>

namespace crescent::transport {

/// The highest CPU number known, plus one (glibc's cpu_set_t).
inline constexpr uint32_t cpu_count_max = 1024;

/// The CPUs this thread may run on (sched_getaffinity), sorted; an error on a machine whose
/// CPUs do not fit in cpu_count_max.
caf::expected<std::vector<uint32_t>> allowed_cpus();

} // namespace crescent::transport
