#include "actors/request/request.hpp"

#include "actors/request/request_state.hpp"

#include <caf/stateful_actor.hpp>

namespace crescent {

namespace {

request_actor::behavior_type request(request_ptr self, request_options options,
                                     std::shared_ptr<const directory> dir) {
  self->state.options = options;
  self->state.dir = std::move(dir);
  return {
      [=](run_atom, const envelope& msg) { return on_run(self, msg); },
      [=](prefill_done_atom, const envelope& msg) { return on_prefill_done(self, msg); },
      [=](tokens_atom, const envelope& msg) { return on_tokens(self, msg); },
      [=](failed_atom, const envelope& msg) { return on_failed(self, msg); },
      [=](deadline_atom) {
        auto& st = self->state;
        finish(self, request_status::failed,
               "deadline passed after " + std::to_string((now_ns(self) - st.arrival_ns) / 1000000) +
                   " ms");
      },
  };
}

} // namespace

request_actor spawn_request_actor(caf::actor_system& sys, request_options options,
                                  std::shared_ptr<const directory> dir) {
  return sys.spawn(request, options, std::move(dir));
}

} // namespace crescent
