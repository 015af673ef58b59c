// The commit this binary was built from, as the experiments' JSON records it.
#pragma once

#include <string_view>

namespace crescent::experiment {

/// The short hash of the checkout's HEAD at build time, "-dirty" appended when tracked files
/// differed from it, or "unknown" when not built from a git checkout
/// (cmake/crescent_git_commit.cmake).
std::string_view built_commit();

} // namespace crescent::experiment
