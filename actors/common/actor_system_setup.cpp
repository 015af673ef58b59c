#include "actors/common/actor_system_setup.hpp"

#include "messages/registration.hpp"

#include <caf/atom.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor.hpp>
#include <caf/local_actor.hpp>
#include <caf/logger.hpp>
#include <caf/scoped_actor.hpp>
#include <fmt/format.h>

#include <cassert>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace crescent {

void setup_actor_system(caf::actor_system_config& cfg, bool networked,
                        connection_liveness liveness) {
  register_types(cfg);
  cfg.set("scheduler.policy", caf::atom("sharing"));
  if (networked) {
    cfg.load<caf::io::middleman>();
    // Messages from other processes are deserialized on the multiplexer thread that read them,
    // not handed to a BASP worker on the scheduler first: one thread wake-up less per message
    // each way (CAF's default is one worker on machines of under 8 cores).
    cfg.set("middleman.workers", size_t{0});
    if (liveness.heartbeat.count() > 0) {
      assert(liveness.timeout >= 2 * liveness.heartbeat);
      cfg.set("middleman.heartbeat-interval", caf::timespan{liveness.heartbeat});
      cfg.set("middleman.connection-timeout", caf::timespan{liveness.timeout});
    }
  }
}

struct process_actor_system::parts {
  caf::actor_system_config cfg;
  std::optional<caf::actor_system> sys; // made once cfg is set up; ends before it
};

namespace {

// Detached actors by system, for the message of a system that does not end.
constexpr size_t detached_noted_max = 4096;

struct detached_registry {
  std::mutex mutex;
  std::vector<std::pair<const void*, caf::actor_addr>> actors; // by system
};

detached_registry& detached() {
  static detached_registry r;
  return r;
}

// Those of system `sys` still referenced ("prefill_worker #7 (1 references)"); all of its
// entries forgotten.
std::string take_detached(const void* sys) {
  std::string out;
  auto& r = detached();
  std::lock_guard<std::mutex> guard{r.mutex};
  for (auto i = r.actors.begin(); i != r.actors.end();) {
    if (i->first != sys) {
      ++i;
      continue;
    }
    if (auto a = caf::actor_cast<caf::strong_actor_ptr>(i->second)) {
      const auto* local = dynamic_cast<const caf::local_actor*>(a->get());
      out += fmt::format("{}{} #{} ({} references)", out.empty() ? "" : ", ",
                         local != nullptr ? local->name() : "actor", a->id(),
                         a->strong_refs.load() - 1);
    }
    i = r.actors.erase(i);
  }
  return out;
}

// Ended actors' last messages to other processes leave the broker's mailbox before the middleman
// stops. An actor's down messages to its remote monitors are sent just after it counts as ended,
// so a second round trip takes those that the first overtook. A broker that does not answer in
// time changes nothing but the wait.
void empty_broker_mailbox(caf::actor_system& sys) {
  constexpr auto answer_timeout = std::chrono::seconds(2);
  caf::scoped_actor self{sys, true};
  for (int round = 0; round < 2; ++round)
    self->request(sys.middleman().actor_handle(), answer_timeout, caf::get_atom::value, sys.node())
        .receive([](const caf::node_id&, const std::string&, uint16_t) {},
                 [](const caf::error&) {});
}

} // namespace

void note_detached_actor(caf::actor_system& sys, const caf::actor_addr& who) {
  auto& r = detached();
  std::lock_guard<std::mutex> guard{r.mutex};
  // Destroyed actors go (a weak entry keeps their memory), so that a process whose systems
  // end otherwise (tests, the simulation's) keeps only the live ones; past the limit, none.
  std::erase_if(r.actors, [](const auto& x) {
    const auto* ctrl = x.second.get();
    return ctrl == nullptr || ctrl->strong_refs.load() == 0;
  });
  if (r.actors.size() < detached_noted_max)
    r.actors.emplace_back(static_cast<const void*>(&sys), who);
}

process_actor_system::process_actor_system(bool networked, connection_liveness liveness)
    : p_(new parts) {
  setup_actor_system(p_->cfg, networked, liveness);
  p_->sys.emplace(p_->cfg);
}

caf::actor_system& process_actor_system::get() noexcept {
  return *p_->sys;
}

process_actor_system::~process_actor_system() {
  auto& sys = *p_->sys;
  sys.await_all_actors_done();
  if (sys.has_middleman())
    empty_broker_mailbox(sys);
  // The system's logger lives until no thread's current logger is it, and ~actor_system waits
  // for that, releasing only the ending thread's: this thread's goes first.
  if (caf::logger::current_logger() == &sys.logger())
    caf::logger::set_current_actor_system(nullptr);
  const void* key = &sys;
  std::promise<void> ended;
  auto done = ended.get_future();
  std::thread ender{[p = p_, ended = std::move(ended)]() mutable {
    delete p;
    ended.set_value();
  }};
  if (done.wait_for(actor_system_end_limit) == std::future_status::ready) {
    ender.join();
    take_detached(key);
    return;
  }
  ender.detach();
  // Those not destroyed yet are the ones it waits for (their objects live while referenced).
  const auto waited_for = take_detached(key);
  fmt::print(stderr,
             "crescent: the actor system did not end within {} s of its actors (CAF waits for an "
             "ended actor that something still references{}{}); going on without it\n",
             actor_system_end_limit.count(), waited_for.empty() ? "" : ": ", waited_for);
}

} // namespace crescent
