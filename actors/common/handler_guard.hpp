// What every actor does with a message it cannot use: count it, log it once in a while, and
// answer with the error. The actor keeps serving.
#pragma once

#include "messages/errors.hpp"

#include <caf/actor_addr.hpp>
#include <caf/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace crescent {

struct bad_message_counter {
  uint64_t count = 0;
  uint64_t returned = 0; // errors peers answered to this actor's one-way messages

  /// Records a refused message and returns the error to reply with.
  caf::error refuse(std::string_view actor, caf::error err);
  /// Records an error a peer answered to a one-way message of this actor.
  void error_returned(std::string_view actor, const caf::error& err);
};

/// A peer that refuses a one-way message (a token batch for a request that already ended, a
/// report from a node it dropped) answers with an error; CAF's default ends the sender for it.
/// Every actor sets this instead: the error is counted and logged once in a while, and the
/// actor keeps serving, so that no peer's refusal, late message or duplicate stops it.
template <class Self>
void keep_serving_on_errors(Self* self) {
  self->set_error_handler(
      [self](caf::error& err) { self->state.bad.error_returned(self->state.name, err); });
}

/// Whether the message in hand came from the actor itself. Its timers (tick, deadline) and its
/// compute steps are internal: from any other sender (another actor, an anonymous or remote
/// message) they are refused, so that nobody outside starts another timer chain or ends a
/// request early.
template <class Self>
bool self_sent(Self* self) {
  return self->current_sender() == self->ctrl();
}

/// Whether the message in hand came from the actor at `who` (none: from nobody entitled).
template <class Self>
bool sent_by(Self* self, const caf::actor_addr& who) {
  return who && self->current_sender() && self->current_sender()->address() == who;
}

/// The one check of a message that only one actor is entitled to send (a node's heartbeat from
/// its agent, a put's commit from its writer, a report from the instance it names): from anyone
/// else it is refused and counted, and the error (access_denied, naming `what` and `who`) is
/// what the handler answers with. None when `who` sent it.
template <class Self>
caf::error refuse_unless_sent_by(Self* self, const caf::actor_addr& who, const std::string& what,
                                 const std::string& entitled) {
  if (sent_by(self, who))
    return caf::none;
  return self->state.bad.refuse(
      self->state.name, make_error(errc::access_denied, what + " comes only from " + entitled));
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
