#include "apps/info_command.hpp"

#include <fmt/format.h>

namespace crescent::cli {

int info_command() {
  fmt::print("crescent {}\n", CRESCENT_VERSION);
  fmt::print("  CUDA code   {}\n", CRESCENT_BUILT_WITH_CUDA ? "built (sm_90)" : "not built");
  fmt::print("  RDMA code   {}\n", CRESCENT_BUILT_WITH_RDMA ? "built (rdma-core)" : "not built");
  fmt::print("  engines     reference (CPU)\n");
  return 0;
}

} // namespace crescent::cli
