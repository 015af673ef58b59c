#include "apps/replay/replay_driver.hpp"

#include "messages/checked_read.hpp"
#include "messages/schema/request.capnp.h"

#include <caf/stateful_actor.hpp>
#include <caf/typed_response_promise.hpp>
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>

namespace crescent::replay {

namespace {

struct driver_state {
  static inline const char* name = "replay_driver";
  cluster* cl = nullptr;
  std::vector<uint64_t> arrivals_ns;
  request_maker make;
  std::shared_ptr<std::vector<request_result>> results;
  replay_options options;
  size_t next = 0; // first request not yet submitted
  size_t ended = 0;
  size_t rejected = 0;
  size_t failed = 0;
  caf::actor_clock::time_point start;
  caf::response_promise done; // untyped: typed promises of void cannot deliver in CAF 0.17
  bool running = false;
};

using self_ptr = replay_driver_actor::stateful_pointer<driver_state>;

void record(self_ptr self, request_result result) {
  auto& st = self->state;
  ++st.ended;
  st.rejected += result.status == outcome_status::rejected ? 1 : 0;
  st.failed += result.status == outcome_status::failed ? 1 : 0;
  st.results->push_back(std::move(result));
  if (st.options.sequential && st.ended < st.arrivals_ns.size())
    self->delayed_send(self, st.options.gap, tick_atom::value);
  if (st.ended == st.arrivals_ns.size()) {
    st.done.deliver(caf::unit);
    self->quit();
  }
}

void submit(self_ptr self, size_t index) {
  auto& st = self->state;
  const auto req = st.make(index);
  const auto id = req.id;
  const auto prompt_tokens = static_cast<uint32_t>(req.tokens.size());
  auto handle = st.cl->spawn_request();
  if (st.options.on_spawn)
    st.options.on_spawn(handle, id);
  auto spec = make_request_spec(req.id, req.tokens, req.max_new_tokens, req.kv_send);
  // The request actor answers by its own deadline; the margin only covers a lost actor.
  auto timeout =
      std::chrono::milliseconds(st.cl->config().request_deadline_ms) + std::chrono::seconds(60);
  self->request(handle, timeout, run_atom::value, spec)
      .then(
          [=](const typed_envelope<wire::RequestOutcome>& outcome) {
            record(self, decode_outcome(outcome, id, prompt_tokens));
          },
          [=](caf::error& err) {
            request_result r;
            r.id = id;
            r.prompt_tokens = prompt_tokens;
            r.reason = "request actor: " + describe(err);
            record(self, std::move(r));
          });
}

void on_tick(self_ptr self) {
  auto& st = self->state;
  if (st.options.sequential) {
    if (st.next < st.arrivals_ns.size() && st.next == st.ended)
      submit(self, st.next++);
    return;
  }
  const auto elapsed = self->clock().now() - st.start;
  const size_t n = st.arrivals_ns.size();
  while (st.next < n && std::chrono::nanoseconds(st.arrivals_ns[st.next]) <= elapsed)
    submit(self, st.next++);
  if (st.next < n)
    self->delayed_send(self, std::chrono::nanoseconds(st.arrivals_ns[st.next]) - elapsed,
                       tick_atom::value);
}

void on_progress(self_ptr self) {
  auto& st = self->state;
  if (st.options.progress == nullptr || st.ended == st.arrivals_ns.size())
    return;
  const double secs = std::chrono::duration<double>(self->clock().now() - st.start).count();
  const bool tty = isatty(fileno(st.options.progress)) != 0;
  fmt::print(st.options.progress,
             "{}[crescent] {:.1f} s  submitted {}/{}  ended {} (rejected {}, failed {}){}",
             tty ? "\r" : "", secs, st.next, st.arrivals_ns.size(), st.ended, st.rejected,
             st.failed, tty ? "   " : "\n");
  std::fflush(st.options.progress);
  self->delayed_send(self, std::chrono::seconds(tty ? 1 : 5), progress_atom::value);
}

replay_driver_actor::behavior_type
replay_driver(self_ptr self, cluster* cl, std::vector<uint64_t> arrivals_ns, request_maker make,
              std::shared_ptr<std::vector<request_result>> results, replay_options options) {
  auto& st = self->state;
  st.cl = cl;
  st.arrivals_ns = std::move(arrivals_ns);
  st.make = std::move(make);
  st.results = std::move(results);
  st.options = options;
  return {
      [=](run_atom) -> caf::result<void> {
        auto& s = self->state;
        if (s.running)
          return make_error(errc::already_exists, "the replay is already running");
        s.running = true;
        s.start = self->clock().now();
        s.done = self->make_response_promise();
        if (s.arrivals_ns.empty()) {
          s.done.deliver(caf::unit);
          return s.done;
        }
        on_tick(self);
        on_progress(self);
        return s.done;
      },
      [=](tick_atom) { on_tick(self); },
      [=](progress_atom) { on_progress(self); },
  };
}

} // namespace

replay_driver_actor spawn_replay_driver(caf::actor_system& sys, cluster& cl,
                                        std::vector<uint64_t> arrivals_ns, request_maker make,
                                        std::shared_ptr<std::vector<request_result>> results,
                                        replay_options options) {
  return sys.spawn(replay_driver, &cl, std::move(arrivals_ns), std::move(make), std::move(results),
                   options);
}

replay_driver_actor spawn_replay_driver(caf::actor_system& sys, cluster& cl,
                                        std::vector<synthetic_request> requests,
                                        std::shared_ptr<std::vector<request_result>> results,
                                        replay_options options) {
  std::vector<uint64_t> arrivals;
  for (const auto& r : requests)
    arrivals.push_back(r.arrival_ns);
  auto all = std::make_shared<std::vector<synthetic_request>>(std::move(requests));
  return spawn_replay_driver(
      sys, cl, std::move(arrivals), [all](size_t i) { return std::move((*all)[i]); },
      std::move(results), options);
}

} // namespace crescent::replay
