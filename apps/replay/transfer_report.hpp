// The transfer engine's counters, as `crescent run` prints them after its summary: how much
// KV moved over which path to which node, and how often a slice was retried or failed.
#pragma once

#include "transport/transfer_types.hpp"

#include <string>
#include <vector>

namespace crescent::replay {

/// One line per path (backend, remote node) that counted anything, busiest path first; one
/// line saying so where none did.
std::string format_transfer_metrics(std::vector<transport::path_metrics> paths);

} // namespace crescent::replay
