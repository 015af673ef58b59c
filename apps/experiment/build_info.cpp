#include "apps/experiment/build_info.hpp"

#include "git_commit.hpp" // generated at build time (apps/CMakeLists.txt)

namespace crescent::experiment {

std::string_view built_commit() {
  return CRESCENT_GIT_COMMIT;
}

} // namespace crescent::experiment
