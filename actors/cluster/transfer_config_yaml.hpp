// The `transfer:` section of a cluster file (transfer_config_yaml.cpp).
#pragma once

#include "actors/cluster/cluster_config.hpp"
#include "actors/cluster/yaml_reader.hpp"

namespace crescent {

/// Reads the section over `t`; values the transfer engine would refuse are errors at the
/// section's line, with the engine's reason.
caf::error read_transfer(yaml_reader& r, const YAML::Node& n, transfer_config& t);

} // namespace crescent
