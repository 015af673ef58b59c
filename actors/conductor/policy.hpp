// Placement policies behind one interface (view.hpp says what they see): each picks a prefill
// instance in its own way (policies/), then all choose decode by predicted TBT and admit
// against the SLOs in the same way (estimate.hpp). Pure functions of the view and of the
// policy's own state (a seeded generator, a round-robin position): tested on hand-built views.
#pragma once

#include "actors/conductor/policies/policies.hpp"
#include "actors/conductor/view.hpp"

namespace crescent {

class scheduling_policy {
 public:
  explicit scheduling_policy(policy_kind kind, uint64_t seed = 1);

  decision place(const schedule_view& v, const request_view& r);
  policy_kind kind() const { return kind_; }

 private:
  policy_kind kind_;
  policies::prefill_fn prefill_;
  policies::policy_state state_;
};

} // namespace crescent
