#include "actors/common/handler_guard.hpp"

#include <spdlog/spdlog.h>

namespace crescent {

caf::error bad_message_counter::refuse(std::string_view actor, caf::error err) {
  ++count;
  // Logging every bad message would let a flood of them flood the log as well.
  if (count <= 10 || count % 1000 == 0)
    spdlog::warn("{}: refused message #{}: {}", actor, count, describe(err));
  return err;
}

void bad_message_counter::error_returned(std::string_view actor, const caf::error& err) {
  ++returned;
  if (returned <= 10 || returned % 1000 == 0)
    spdlog::info("{}: a peer refused message #{}: {}", actor, returned, describe(err));
}

} // namespace crescent
