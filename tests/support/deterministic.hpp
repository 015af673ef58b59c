// An actor system on CAF's deterministic test scheduler with its virtual clock, for driving
// Crescent's real actors step by step: no threads, no sleeps, the same run every time.
#pragma once

#include "actors/common/reply_type.hpp"
#include "messages/envelope.hpp"
#include "messages/errors.hpp"
#include "messages/registration.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

namespace crescent::testing {

class deterministic_config : public caf::actor_system_config {
 public:
  deterministic_config() {
    register_types(*this);
    set("scheduler.policy", caf::atom("testing"));
    set("logger.file-verbosity", caf::atom("quiet"));
    set("logger.console-verbosity", caf::atom("quiet"));
  }
};

class deterministic_system {
 public:
  deterministic_system()
      : sys(cfg), sched(dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler())) {
    // A test that failed halfway may leave actors waiting; do not hang on them at the end.
    sys.await_actors_before_shutdown(false);
  }

  /// Runs every ready job, then fires timeouts in time order, until pred() holds. Returns
  /// pred(); false also when nothing is left to run or `timeouts_max` timeouts fired.
  template <class Pred>
  bool run_until(Pred pred, size_t timeouts_max = 1u << 22) {
    for (size_t i = 0; i <= timeouts_max; ++i) {
      sched.run();
      if (pred())
        return true;
      if (!sched.trigger_timeout())
        return pred();
    }
    return pred();
  }

  /// Virtual time since the system started.
  std::chrono::nanoseconds elapsed() const {
    return sched.clock().current_time.time_since_epoch() - start_;
  }

  /// Sends a request from a short-lived client actor and runs the system until the answer is
  /// in. Returns the answer or the error. For handlers that answer with one value (an envelope
  /// of the schema that the handle's interface names).
  template <class Handle, class... Ts>
  caf::expected<reply_t<Handle, Ts...>> ask(const Handle& dest, Ts... xs) {
    using reply = reply_t<Handle, Ts...>;
    auto result = std::make_shared<std::optional<caf::expected<reply>>>();
    sys.spawn([=](caf::event_based_actor* client) {
      client->request(dest, caf::infinite, xs...)
          .then([=](reply& reply) { *result = std::move(reply); },
                [=](caf::error& err) { *result = std::move(err); });
    });
    if (!run_until([&] { return result->has_value(); }))
      return make_error(errc::timeout, "no answer");
    return std::move(**result);
  }

  /// Puts a one-way message in `dest`'s mailbox as `as` sent it (the sender a handler is entitled
  /// to hear it from), and runs the system.
  template <class Dest, class From, class... Ts>
  void send_as(const From& as, const Dest& dest, Ts... xs) {
    caf::actor_cast<caf::strong_actor_ptr>(dest)->enqueue(
        caf::make_mailbox_element(caf::actor_cast<caf::strong_actor_ptr>(as),
                                  caf::make_message_id(), {}, std::move(xs)...),
        nullptr);
    sched.run();
  }

  /// As ask, for handlers that answer with nothing but success or an error.
  template <class Handle, class... Ts>
  caf::error ask_void(const Handle& dest, Ts... xs) {
    auto result = std::make_shared<std::optional<caf::error>>();
    sys.spawn([=](caf::event_based_actor* client) {
      client->request(dest, caf::infinite, xs...)
          .then([=]() { *result = caf::error{}; },
                [=](caf::error& err) { *result = std::move(err); });
    });
    if (!run_until([&] { return result->has_value(); }))
      return make_error(errc::timeout, "no answer");
    return std::move(**result);
  }

  deterministic_config cfg;
  caf::actor_system sys;
  caf::scheduler::test_coordinator& sched;

 private:
  std::chrono::nanoseconds start_ = sched.clock().current_time.time_since_epoch();
};

} // namespace crescent::testing
