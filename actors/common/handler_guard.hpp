// What every actor does with a message it cannot use: count it, log it once in a while, and
// answer with the error. The actor keeps serving.
#pragma once

#include "messages/errors.hpp"

#include <caf/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace crescent {

struct bad_message_counter {
  uint64_t count = 0;

  /// Records a refused message and returns the error to reply with.
  caf::error refuse(std::string_view actor, caf::error err);
};

/// Whether the message in hand came from the actor itself. Its timers (tick, deadline) and its
/// compute steps are internal: from any other sender (another actor, an anonymous or remote
/// message) they are refused, so that nobody outside starts another timer chain or ends a
/// request early.
template <class Self>
bool self_sent(Self* self) {
  return self->current_sender() == self->ctrl();
}

/// Refuses an internal message that did not come from the actor itself (see self_sent).
template <class Self>
bool refuse_unless_self_sent(Self* self, const char* what) {
  if (self_sent(self))
    return false;
  self->state.bad.refuse(
      self->state.name,
      make_error(errc::access_denied, std::string{what} + " is internal: only the actor sends it"));
  return true;
}

} // namespace crescent
