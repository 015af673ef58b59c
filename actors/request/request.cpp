#include "actors/request/request.hpp"

#include "actors/common/code_probe.hpp"
#include "actors/request/request_state.hpp"
#include "messages/schema/request.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>

namespace crescent {

namespace {

request_actor::behavior_type request(request_ptr self, request_options options, directory_ref dir) {
  self->state.options = options;
  self->state.dir = std::move(dir);
  // The workers it waits for are watched: one that stops (it crashed, its process died or
  // became unreachable) fails the request now instead of at its deadline.
  keep_serving_on_errors(self);
  self->set_down_handler([=](caf::down_msg& down) {
    auto& st = self->state;
    if (st.done || !st.placed)
      return;
    if (st.coupled) {
      if (down.source != st.dir->coupled[st.decode_instance].address())
        return; // an earlier attempt's instance
      fail_or_retry(self, failed_part::prefill, request_status::failed,
                    "coupled instance " + std::to_string(st.decode_instance) +
                        " stopped: " + caf::to_string(down.reason));
      return;
    }
    const bool decode = down.source == st.dir->decode[st.decode_instance].address();
    const bool prefill = down.source == st.dir->prefill[st.prefill_instance].address();
    // Not this attempt's (a decode instance tried before, an earlier attempt's), or a down
    // message queued before the watch ended: the prefill's part is done.
    if (!decode && !(prefill && prefill_owes(st)))
      return;
    fail_or_retry(self, decode ? failed_part::decode : failed_part::prefill, request_status::failed,
                  std::string{decode ? "decode" : "prefill"} + " instance " +
                      std::to_string(decode ? st.decode_instance : st.prefill_instance) +
                      " stopped: " + caf::to_string(down.reason));
  });
  return {
      [=](run_atom, const typed_envelope<wire::RequestSpec>& msg) { return on_run(self, msg); },
      [=](stream_atom, const typed_envelope<wire::RequestSpec>& msg, caf::actor listener) {
        return on_stream(self, msg, std::move(listener));
      },
      [=](cancel_atom) { on_cancel(self); },
      [=](prefill_done_atom, const typed_envelope<wire::PrefillDone>& msg) {
        return on_prefill_done(self, msg);
      },
      [=](tokens_atom, const typed_envelope<wire::TokenBatch>& msg) {
        return on_tokens(self, msg);
      },
      [=](failed_atom, const typed_envelope<wire::RequestFailed>& msg) {
        return on_failed(self, msg);
      },
      [=](schedule_atom) { // a retried request that no instance took asks again
        if (refuse_unless_self_sent(self, "schedule"))
          return;
        if (!self->state.done)
          schedule(self);
      },
      [=](quiet_atom) {
        if (!refuse_unless_self_sent(self, "quiet"))
          on_quiet(self);
      },
      [=](deadline_atom) {
        if (refuse_unless_self_sent(self, "deadline"))
          return;
        CRESCENT_PROBE("request.deadline");
        auto& st = self->state;
        finish(self, request_status::failed,
               "deadline passed after " + std::to_string((now_ns(self) - st.arrival_ns) / 1000000) +
                   " ms");
      },
  };
}

} // namespace

request_actor spawn_request_actor(caf::actor_system& sys, request_options options,
                                  directory_ref dir) {
  return sys.spawn(request, options, std::move(dir));
}

typed_envelope<wire::RequestSpec> make_request_spec(uint64_t id, std::span<const uint32_t> prompt,
                                                    uint32_t max_new_tokens, wire::KvSend kv_send) {
  return make_envelope<wire::RequestSpec>([&](wire::RequestSpec::Builder out) {
    out.setRequestId(id);
    auto tokens = out.initTokens(static_cast<unsigned>(prompt.size()));
    for (unsigned i = 0; i < prompt.size(); ++i)
      tokens.set(i, prompt[i]);
    out.setMaxNewTokens(max_new_tokens);
    out.setKvSend(kv_send);
  });
}

} // namespace crescent
