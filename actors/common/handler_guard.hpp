// What every actor does with a message it cannot use: count it, log it once in a while, and
// answer with the error. The actor keeps serving.
#pragma once

#include "messages/errors.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <string_view>

namespace crescent {

struct bad_message_counter {
  uint64_t count = 0;

  /// Records a refused message and returns the error to reply with.
  caf::error refuse(std::string_view actor, caf::error err);
};

} // namespace crescent
