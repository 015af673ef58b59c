// An ask that is sent again while it goes unanswered: for the asks whose receivers answer a copy
// as they answered the first (a decode reservation, a prefill or coupled job, a kv_ready), so
// that one lost ask or answer costs ask_resend_timeout instead of what the ask was for.
#pragma once

#include "actors/common/timeouts.hpp"

#include <caf/error.hpp>
#include <caf/sec.hpp>

namespace crescent {

/// Asks `receiver` with (`atom`, `msg`), and again each ask_resend_timeout that it goes
/// unanswered, up to ask_sends_max times in all (together control_timeout). `answered` takes
/// the answer; `refused` the error: the receiver's, or the last send's timeout. `wanted()` says
/// whether the answer is still wanted: once it is not (the request moved on, the job ended), a
/// timeout goes to `refused` without another send, for it to drop.
template <class Self, class Receiver, class Atom, class Msg, class Wanted, class Answered,
          class Refused>
void ask_again(Self self, const Receiver& receiver, Atom atom, const Msg& msg, Wanted wanted,
               Answered answered, Refused refused, unsigned sends = 1) {
  self->request(receiver, ask_resend_timeout, atom, msg).then(answered, [=](caf::error& err) {
    if (err == caf::sec::request_timeout && sends < ask_sends_max && wanted()) {
      ask_again(self, receiver, atom, msg, wanted, answered, refused, sends + 1);
      return;
    }
    refused(err);
  });
}

} // namespace crescent
