// How a worker moves on to its next compute step. In real time the step's compute has already
// taken its time on this thread, so the next step is queued at once (behind whatever else is in
// the mailbox). In simulated time nothing took time, so the next step waits on CAF's clock for
// as long as the step would have taken: the virtual clock advances by the modeled cost.
#pragma once

#include "messages/atoms.hpp"

#include <chrono>
#include <cstdint>

namespace crescent {

template <class Self>
void send_next_step(Self* self, bool simulated_time, uint64_t compute_ns) {
  if (simulated_time && compute_ns > 0)
    self->delayed_send(self, std::chrono::nanoseconds(compute_ns), step_atom::value);
  else
    self->send(self, step_atom::value);
}

} // namespace crescent
