// Profiles of the modeled engine (gpu/modeled_profile.hpp) as YAML: the files of data/profiles/
// are also built into the binary under their names, so that a cluster file or the built-in paper
// cluster can name one (engine.profile: llama3-70b-8xa800) in a clone with nothing beside it.
#pragma once

#include "gpu/modeled_profile.hpp"

#include <caf/expected.hpp>

#include <memory>
#include <string>
#include <vector>

namespace crescent {

/// Parses a profile; errors name the source, the line and the field. Unknown keys are errors.
caf::expected<std::shared_ptr<const gpu::modeled_profile>>
parse_profile(const std::string& yaml_text, const std::string& source_name);

/// A built-in profile by name, or else a profile file at `name_or_path` (relative paths from
/// `base_dir` when it is given and the file is there, else from the working directory).
caf::expected<std::shared_ptr<const gpu::modeled_profile>>
load_profile(const std::string& name_or_path, const std::string& base_dir = "");

/// Names of the built-in profiles, and the YAML text of one (empty if there is none).
std::vector<std::string> builtin_profile_names();
std::string builtin_profile_text(const std::string& name);

} // namespace crescent
