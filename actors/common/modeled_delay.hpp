// When a batch of transfers ends, for the actor that submitted it. On a real transfer engine the
// batch has ended when its callback runs, and the callback's message goes out at once. On one
// with modeled links (simulated time: transport/modeled_links.hpp) the bytes have moved when the
// callback runs, but the batch ends op_result::modeled_ns later on CAF's clock, so the message
// goes out that much later. The actors are the same code in both; only the engine's answer
// differs (0 on every real engine).
#pragma once

#include "transport/transfer_types.hpp"

#include <caf/actor_addr.hpp>
#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <span>
#include <utility>

namespace crescent {

/// When, after submit, the last of `results` ends in modeled time (0 on real engines).
inline uint64_t batch_end_ns(std::span<const transport::op_result> results) {
  uint64_t end = 0;
  for (const auto& r : results)
    end = std::max(end, r.modeled_ns);
  return end;
}

/// Sends xs to the actor at `dest`, of type Handle, `delay_ns` from now on CAF's clock,
/// anonymously; at once for 0, which is what every real engine says (and from any thread: a real
/// engine's callback runs on its own). Nothing when that actor has ended. The address is weak
/// because the engine holds the callback until its batch ends, which may be after the actor:
/// a strong handle would keep an ended actor alive, and CAF 0.17 waits for every actor with a
/// thread of its own to be destroyed before a process can end.
template <class Handle, class... Ts>
void send_at_batch_end(const caf::actor_addr& dest_addr, uint64_t delay_ns, Ts&&... xs) {
  auto dest = caf::actor_cast<Handle>(dest_addr);
  if (!dest)
    return;
  if (delay_ns == 0)
    caf::anon_send(dest, std::forward<Ts>(xs)...);
  else
    caf::delayed_anon_send(dest, std::chrono::nanoseconds(delay_ns), std::forward<Ts>(xs)...);
}

} // namespace crescent
