#include "apps/sim/sim_system.hpp"

#include "apps/sim/schema_names.hpp"
#include "messages/envelope_schemas.hpp"
#include "messages/registration.hpp"

#include <caf/abstract_actor.hpp>
#include <caf/local_actor.hpp>
#include <caf/mailbox_element.hpp>
#include <caf/scheduled_actor.hpp>
#include <caf/system_messages.hpp>
#include <fmt/format.h>
#include <xxhash.h>

#include <algorithm>

namespace crescent::sim {

struct sim_system::hash_state {
  hash_state() : state(XXH3_createState()) { XXH3_64bits_reset(state); }
  ~hash_state() { XXH3_freeState(state); }
  hash_state(const hash_state&) = delete;
  hash_state& operator=(const hash_state&) = delete;
  XXH3_state_t* state;
};

sim_config::sim_config() {
  register_types(*this);
  set("scheduler.policy", caf::atom("testing"));
  set("logger.file-verbosity", caf::atom("quiet"));
  set("logger.console-verbosity", caf::atom("quiet"));
}

sim_system::sim_system(delivery_policy* policy)
    : sys_(cfg_), sched_(dynamic_cast<caf::scheduler::test_coordinator&>(sys_.scheduler())),
      policy_(policy), start_(sched_.clock().current_time.time_since_epoch()),
      hash_(std::make_unique<hash_state>()) {
  // Actors still waiting at the end (timers of a finished run) must not hold up shutdown.
  sys_.await_actors_before_shutdown(false);
}

sim_system::~sim_system() = default;

std::chrono::nanoseconds sim_system::elapsed() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
      sched_.clock().current_time.time_since_epoch() - start_);
}

void sim_system::label(const caf::actor_addr& actor, std::string name, int32_t place) {
  if (!actor)
    return;
  labels_.push_back(std::move(name));
  places_.push_back(place);
  label_by_actor_[actor.id()] = static_cast<uint32_t>(labels_.size() - 1);
}

uint32_t sim_system::label_of(const caf::abstract_actor* actor) {
  if (actor == nullptr)
    return 0;
  auto i = label_by_actor_.find(actor->id());
  if (i != label_by_actor_.end())
    return i->second;
  const auto* local = dynamic_cast<const caf::local_actor*>(actor);
  labels_.push_back(fmt::format("{}#{}", local != nullptr ? local->name() : "actor", actor->id()));
  places_.push_back(main_place);
  const auto index = static_cast<uint32_t>(labels_.size() - 1);
  label_by_actor_.emplace(actor->id(), index);
  return index;
}

uint32_t sim_system::type_index(const std::string& type) {
  auto [i, fresh] = type_by_name_.emplace(type, static_cast<uint32_t>(types_.size()));
  if (fresh)
    types_.push_back(type);
  return i->second;
}

namespace {

// What a message is: its operation (the leading atom), or what CAF sent (a reply, a down or
// exit message), followed by the schema of the Cap'n Proto payload it carries.
std::string type_of(const caf::mailbox_element& e, uint64_t& bytes) {
  const auto& content = e.content();
  std::string type;
  if (content.size() > 0 && content.match_element<caf::atom_value>(0))
    type = caf::to_string(content.get_as<caf::atom_value>(0));
  else if (e.mid.is_response())
    type = "reply";
  else if (content.size() > 0 && content.match_element<caf::down_msg>(0))
    type = "down";
  else if (content.size() > 0 && content.match_element<caf::exit_msg>(0))
    type = "exit";
  else
    type = "message";
  for (size_t i = 0; i < content.size(); ++i) {
    if (const auto* env = envelope_in(content, i)) {
      bytes += env->size_bytes();
      type += "/" + schema_name(env->schema_id());
    } else if (content.match_element<caf::error>(i) && e.mid.is_response()) {
      // CAF 0.17 fires a request's timeout even after its answer came (the actor drops it).
      const auto& err = content.get_as<caf::error>(i);
      type += err == caf::sec::request_timeout ? "/timeout" : "/error";
    }
  }
  return type;
}

// The first Cap'n Proto envelope a message carries (null: none).
const envelope* payload_of(const caf::mailbox_element* e) {
  if (e == nullptr)
    return nullptr;
  const auto& content = e->content();
  for (size_t i = 0; i < content.size(); ++i)
    if (const auto* env = envelope_in(content, i))
      return env;
  return nullptr;
}

} // namespace

const caf::mailbox_element* sim_system::front_element() const {
  auto* actor = dynamic_cast<caf::scheduled_actor*>(sched_.jobs.front());
  return actor != nullptr ? actor->mailbox().peek() : nullptr;
}

delivered_message sim_system::describe_front() {
  delivered_message m;
  m.time_ns = elapsed().count();
  m.receiver = label_of(dynamic_cast<caf::scheduled_actor*>(sched_.jobs.front()));
  const caf::mailbox_element* e = front_element();
  if (e == nullptr) {
    m.type = type_index("none");
    return m;
  }
  m.sender = label_of(e->sender ? e->sender->get() : nullptr);
  m.type = type_index(type_of(*e, m.bytes));
  return m;
}

void sim_system::choose_next() {
  std::vector<delivered_message> described;
  std::vector<ready_message> ready;
  // Each job in turn at the front, to be described as it would run.
  for (size_t k = 0; k < sched_.jobs.size(); ++k) {
    std::swap(sched_.jobs.front(), sched_.jobs[k]);
    described.push_back(describe_front());
    std::swap(sched_.jobs.front(), sched_.jobs[k]);
  }
  for (const auto& d : described)
    ready.push_back(ready_of(d));
  const size_t pick = std::min(policy_->pick(ready), sched_.jobs.size() - 1);
  std::rotate(sched_.jobs.begin(), sched_.jobs.begin() + static_cast<ptrdiff_t>(pick),
              sched_.jobs.begin() + static_cast<ptrdiff_t>(pick) + 1);
}

ready_message sim_system::ready_of(const delivered_message& d) {
  const std::string& type = types_[d.type];
  // Down and exit messages are made where they are received (type_of names them so).
  const bool system = type.rfind("down", 0) == 0 || type.rfind("exit", 0) == 0;
  return {d.receiver,
          labels_[d.receiver],
          d.sender,
          labels_[d.sender],
          type,
          d.bytes,
          d.time_ns,
          places_[d.receiver],
          places_[d.sender],
          system};
}

void sim_system::record(const delivered_message& m) {
  // Field by field: the struct's padding holds no defined bytes.
  const uint64_t record[5] = {static_cast<uint64_t>(m.time_ns), m.sender, m.receiver, m.type,
                              m.bytes};
  XXH3_64bits_update(hash_->state, record, sizeof(record));
  if (tap_)
    tap_(m);
}

namespace {

// Takes `e`, the message at the front of `actor`'s mailbox, out of it (null where it is not
// the front: messages the actor skipped wait in a cache ahead of it).
caf::mailbox_element_ptr take_front(caf::scheduled_actor& actor, const caf::mailbox_element* e) {
  auto& urgent = actor.get_urgent_queue();
  if (urgent.peek() == e)
    return urgent.cache().empty() ? urgent.take_front() : nullptr;
  auto& normal = actor.get_normal_queue();
  if (normal.peek() == e && normal.cache().empty())
    return normal.take_front();
  return nullptr;
}

constexpr const char* action_name(fault_verdict::action a) {
  switch (a) {
  case fault_verdict::action::drop:
    return "drop";
  case fault_verdict::action::duplicate:
    return "duplicate";
  case fault_verdict::action::hold:
    return "hold";
  case fault_verdict::action::deliver:
    break;
  }
  return "deliver";
}

} // namespace

void sim_system::note_made(const caf::mailbox_element* e, int64_t due_ns, const void* receiver) {
  // Entries whose message never came (its receiver ended) are dropped now and then.
  constexpr size_t made_kept_max = 4096;
  if (unfiltered_.size() >= made_kept_max)
    std::erase_if(unfiltered_,
                  [now = elapsed().count()](const auto& kv) { return kv.second.due_ns < now; });
  unfiltered_[e] = {due_ns, receiver, e->sender ? e->sender.get() : nullptr};
}

bool sim_system::made_here(const caf::mailbox_element* e, int64_t now_ns, const void* receiver) {
  auto it = unfiltered_.find(e);
  if (it == unfiltered_.end())
    return false;
  const auto made = it->second;
  unfiltered_.erase(it);
  return made.due_ns == now_ns && made.receiver == receiver &&
         made.sender == (e->sender ? e->sender.get() : nullptr);
}

// Carries out a filter's verdict on the front message; false: deliver it now (a duplicate's
// original, or a message that cannot be taken out of turn).
bool sim_system::apply_fault(const delivered_message& m, const fault_verdict& v) {
  auto* actor = dynamic_cast<caf::scheduled_actor*>(sched_.jobs.front());
  const caf::mailbox_element* e = front_element();
  if (actor == nullptr || e == nullptr)
    return false;
  delivered_message note = m;
  note.type = type_index(std::string{action_name(v.what)} + ":" + types_[m.type]);
  if (v.what == fault_verdict::action::duplicate) {
    // The copy queues behind what the actor already has, or comes at its time; the original
    // goes now.
    auto copy =
        caf::make_mailbox_element(e->sender, e->mid, e->stages,
                                  const_cast<caf::mailbox_element*>(e)->copy_content_to_message());
    // A copy is not copied again, or lost.
    note_made(copy.get(), std::max(v.until_ns, m.time_ns), actor);
    if (v.until_ns > m.time_ns) {
      const auto at = std::chrono::duration_cast<caf::actor_clock::duration_type>(
          start_ + std::chrono::nanoseconds(v.until_ns));
      sched_.clock().schedule_message(caf::actor_clock::time_point{at},
                                      caf::strong_actor_ptr{actor->ctrl()}, std::move(copy));
    } else {
      actor->enqueue(std::move(copy), nullptr);
    }
    record(note);
    return false;
  }
  auto taken = take_front(*actor, e);
  if (taken == nullptr)
    return false;
  record(note);
  if (v.what == fault_verdict::action::hold) {
    // Judged once: it is not held again when it comes back.
    note_made(taken.get(), std::max(v.until_ns, m.time_ns), actor);
    const auto at = std::chrono::duration_cast<caf::actor_clock::duration_type>(
        start_ + std::chrono::nanoseconds(std::max(v.until_ns, m.time_ns)));
    sched_.clock().schedule_message(caf::actor_clock::time_point{at},
                                    caf::strong_actor_ptr{actor->ctrl()}, std::move(taken));
  }
  // An actor left with nothing must block, or a later message would not schedule it again.
  if (actor->mailbox().empty())
    sched_.try_run_once();
  return true;
}

void sim_system::deliver_one() {
  if (policy_ != nullptr && sched_.jobs.size() > 1)
    choose_next();
  const auto m = describe_front();
  const caf::mailbox_element* front = front_element();
  if (front != nullptr &&
      made_here(front, m.time_ns, dynamic_cast<caf::scheduled_actor*>(sched_.jobs.front()))) {
    // A duplicate or a message that was held: delivered as it is.
  } else if (filter_ != nullptr && front != nullptr) {
    const auto verdict = filter_->judge(ready_of(m));
    if (verdict.what != fault_verdict::action::deliver && apply_fault(m, verdict))
      return;
  }
  record(m);
  if (payload_tap_)
    payload_tap_(m, payload_of(front_element()));
  sched_.try_run_once();
  ++delivered_;
  if (progress_ && progress_every_ != 0 && delivered_ % progress_every_ == 0)
    progress_();
}

void sim_system::run_ready() {
  while (!sched_.jobs.empty())
    deliver_one();
}

bool sim_system::run_until(const std::function<bool()>& done) {
  for (;;) {
    run_ready();
    if (done())
      return true;
    if (!sched_.trigger_timeout())
      return done();
  }
}

uint64_t sim_system::stream_hash() const {
  return XXH3_64bits_digest(hash_->state);
}

} // namespace crescent::sim
