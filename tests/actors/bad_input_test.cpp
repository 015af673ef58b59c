// Every actor answers damaged messages with an error and keeps serving: truncated and
// bit-flipped envelopes, with the envelope checksum intact (caught before decoding) and resealed
// (so that Cap'n Proto's own checks and the actors' range checks are what stands in the way).
#include "../messages/sample_messages.hpp"
#include "actors/common/reply_type.hpp"
#include "actors/request/request.hpp"
#include "apps/replay/workload.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/request.capnp.h"
#include "messages/schema/store.capnp.h"
#include "messages/schema/worker.capnp.h"
#include "support/test_cluster.hpp"

#include <cstring>
#include <functional>

namespace crescent::testing {
namespace {

struct target {
  std::string name;
  envelope sample;
  std::function<caf::expected<envelope>(envelope)> send;
};

template <class Schema, bool VoidReply, class Handle, class... Atoms>
target make_target(cluster_harness& h, std::string name, Handle dest, Atoms...) {
  target t{std::move(name), sample_envelope<Schema>(), {}};
  // Damaged bytes travel under the handler's own type: only reading them finds the damage.
  t.send = [&h, dest](envelope msg) -> caf::expected<envelope> {
    auto typed = typed_envelope<Schema>::retype(std::move(msg));
    if constexpr (VoidReply) {
      if (auto err = h.ask_void(dest, Atoms::value..., typed))
        return err;
      return envelope{};
    } else {
      auto reply = h.ask(dest, Atoms::value..., typed);
      if (!reply)
        return std::move(reply.error());
      return envelope{*reply};
    }
  };
  return t;
}

std::vector<target> all_targets(cluster_harness& h) {
  const auto& d = h.cl->dir();
  return {
      make_target<wire::ScheduleRequest, false>(h, "conductor/schedule", d.conductor,
                                                schedule_atom{}),
      make_target<wire::PrefillReport, true>(h, "conductor/report", d.conductor, report_atom{}),
      make_target<wire::RequestReport, true>(h, "conductor/finished", d.conductor, finished_atom{}),
      make_target<wire::Heartbeat, true>(h, "conductor/heartbeat", d.conductor, heartbeat_atom{}),
      make_target<wire::PutStart, false>(h, "store_master/put_start", d.store_master,
                                         put_start_atom{}),
      make_target<wire::PutCommit, true>(h, "store_master/put_commit", d.store_master,
                                         put_commit_atom{}),
      make_target<wire::PutRevoke, true>(h, "store_master/put_revoke", d.store_master,
                                         put_revoke_atom{}),
      make_target<wire::Get, false>(h, "store_master/get", d.store_master, get_atom{}),
      make_target<wire::Exists, false>(h, "store_master/exists", d.store_master, exists_atom{}),
      make_target<wire::Remove, true>(h, "store_master/remove", d.store_master, remove_atom{}),
      make_target<wire::Pin, true>(h, "store_master/pin", d.store_master, pin_atom{}),
      make_target<wire::Unpin, true>(h, "store_master/unpin", d.store_master, unpin_atom{}),
      make_target<wire::ReportCorrupt, true>(h, "store_master/corrupt", d.store_master,
                                             corrupt_atom{}),
      make_target<wire::OwnerHeartbeat, true>(h, "store_master/owner_heartbeat", d.store_master,
                                              owner_atom{}, heartbeat_atom{}),
      make_target<wire::OwnerReport, false>(h, "store_master/owner_report", d.store_master,
                                            owner_atom{}, report_atom{}),
      make_target<wire::EvictRequest, false>(h, "store_master/evict", d.store_master, evict_atom{}),
      make_target<wire::Allocate, false>(h, "block_owner/allocate", d.block_owners[0],
                                         allocate_atom{}),
      make_target<wire::FreeBlocks, true>(h, "block_owner/free", d.block_owners[0], free_atom{}),
      make_target<wire::Promote, false>(h, "block_owner/promote", d.block_owners[0],
                                        promote_atom{}),
      make_target<wire::PrefillJob, false>(h, "prefill/prefill", d.prefill[0], prefill_atom{}),
      make_target<wire::ReserveRequest, false>(h, "decode/reserve", d.decode[0], reserve_atom{}),
      make_target<wire::ReleaseRequest, true>(h, "decode/release", d.decode[0], release_atom{}),
      make_target<wire::KvReady, true>(h, "decode/kv_ready", d.decode[0], kv_ready_atom{}),
  };
}

// Each actor still answers a well-formed query after the damage.
void expect_all_serving(cluster_harness& h) {
  const auto& d = h.cl->dir();
  EXPECT_TRUE(h.ask(d.conductor, stats_atom::value));
  EXPECT_TRUE(h.ask(d.store_master, stats_atom::value));
  EXPECT_TRUE(h.ask(d.block_owners[0], stats_atom::value));
  EXPECT_TRUE(h.ask(d.prefill[0], stats_atom::value));
  EXPECT_TRUE(h.ask(d.decode[0], stats_atom::value));
}

// Truncated, resealed, bit-flipped, empty and wrong-schema forms of the target's sample.
void expect_damage_refused(target& t) {
  SCOPED_TRACE(t.name);
  {
    const auto& env = t.sample;
    for (size_t n = 0; n < env.size_words(); ++n) {
      auto cut = t.send(env.with_words(prefix_words(env, n)));
      ASSERT_FALSE(cut) << "truncated to " << n << " words";
      // Nothing left at all is an empty envelope; anything else fails its checksum.
      EXPECT_TRUE(is(cut.error(), n == 0 ? errc::malformed_message : errc::message_checksum));
      auto resealed = t.send(reseal(env.schema_id(), prefix_words(env, n)));
      ASSERT_FALSE(resealed) << "resealed truncation to " << n << " words";
      EXPECT_TRUE(is(resealed.error(), errc::malformed_message)) << describe(resealed.error());
    }
    for (size_t bit = 0; bit < env.size_bytes() * 8; bit += 11) {
      auto flipped = t.send(flip(env, bit));
      ASSERT_FALSE(flipped) << "bit " << bit;
      EXPECT_TRUE(is(flipped.error(), errc::message_checksum));
    }
    EXPECT_FALSE(t.send(envelope{})) << "empty envelope";
    EXPECT_FALSE(t.send(sample_envelope<wire::Ack>())) << "another schema";
  }
}

TEST(bad_input, damaged_envelopes_get_error_replies_from_every_actor) {
  cluster_harness h{small_cluster(1, 1)};
  for (auto& t : all_targets(h))
    expect_damage_refused(t);
  expect_all_serving(h);
}

// Every actor's count of refused messages, from the stats it answers with.
template <class Handle>
uint64_t bad_count(cluster_harness& h, const Handle& who) {
  using schema = typename reply_t<Handle, stats_atom>::schema_type;
  auto stats = h.ask(who, stats_atom::value);
  EXPECT_TRUE(stats) << describe(stats.error());
  if (!stats)
    return 0;
  auto n = read_as<schema>(*stats, [](typename schema::Reader in) { return in.getBadMessages(); });
  return n ? *n : 0;
}

TEST(bad_input, internal_messages_from_outside_are_refused) {
  // A tick from outside would start another permanent timer chain; a step would run a job's
  // next step out of turn. From anyone but the actor itself, both are refused and counted.
  cluster_harness h{small_cluster(1, 1)};
  const auto& d = h.cl->dir();
  const uint64_t before[] = {bad_count(h, d.prefill[0]), bad_count(h, d.decode[0]),
                             bad_count(h, d.store_master), bad_count(h, d.block_owners[0])};
  caf::anon_send(d.prefill[0], step_atom::value);
  caf::anon_send(d.decode[0], step_atom::value);
  caf::anon_send(d.store_master, tick_atom::value);
  caf::anon_send(d.block_owners[0], tick_atom::value);
  caf::anon_send(d.node_agents[0], tick_atom::value);
  h.sched.run();
  EXPECT_EQ(bad_count(h, d.prefill[0]), before[0] + 1);
  EXPECT_EQ(bad_count(h, d.decode[0]), before[1] + 1);
  EXPECT_EQ(bad_count(h, d.store_master), before[2] + 1);
  EXPECT_EQ(bad_count(h, d.block_owners[0]), before[3] + 1);
  // kv_ready from anyone but a prefill worker is refused, even when it names a request.
  auto ready = make_envelope<wire::KvReady>([](wire::KvReady::Builder out) {
    out.setRequestId(1);
    out.setPromptTokens(16);
  });
  auto refused = h.ask_void(d.decode[0], kv_ready_atom::value, ready);
  EXPECT_TRUE(is(refused, errc::access_denied)) << describe(refused);
  // And the cluster still serves.
  auto results = h.replay({replay::synthesize(record_of({1, 2, 3}, 4), 0, h.workload())});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, replay::outcome_status::completed) << results[0].reason;
}

TEST(bad_input, resealed_bit_flips_are_answered_and_survived) {
  // A flip in a resealed message may still be a valid message (another id, say), so the answer
  // may be a value; what matters is that every message is answered and nobody dies.
  cluster_harness h{small_cluster(1, 1)};
  size_t errors = 0, answers = 0;
  for (auto& t : all_targets(h)) {
    SCOPED_TRACE(t.name);
    for (size_t bit = 0; bit < t.sample.size_bytes() * 8; bit += 3) {
      auto damaged = flip(t.sample, bit);
      auto r = t.send(reseal(damaged.schema_id(), prefix_words(damaged, damaged.size_words())));
      ASSERT_FALSE(!r && is(r.error(), errc::timeout)) << "no answer, bit " << bit;
      ++answers;
      errors += r ? 0 : 1;
    }
  }
  EXPECT_GT(errors, answers / 2);
  expect_all_serving(h);
}

TEST(bad_input, request_actor_refuses_bad_specs_and_then_serves) {
  cluster_harness h{small_cluster(1, 1)};
  auto req = h.cl->spawn_request();
  auto sample = sample_envelope<wire::RequestSpec>(); // token ids outside the vocabulary
  auto bad = h.ask(req, run_atom::value, sample);
  ASSERT_FALSE(bad);
  EXPECT_TRUE(is(bad.error(), errc::invalid_argument)) << describe(bad.error());
  auto cut_spec = [&](size_t n) {
    return typed_envelope<wire::RequestSpec>::retype(
        reseal(sample.schema_id(), prefix_words(sample, n)));
  };
  for (size_t n = 0; n < sample.size_words(); ++n)
    EXPECT_FALSE(h.ask(req, run_atom::value, cut_spec(n)));
  const std::vector<uint32_t> prompt{1, 2, 3};
  auto unknown_way =
      h.ask(req, run_atom::value, make_request_spec(7, prompt, 1, static_cast<wire::KvSend>(7)));
  ASSERT_FALSE(unknown_way);
  EXPECT_TRUE(is(unknown_way.error(), errc::invalid_argument));
  EXPECT_NE(describe(unknown_way.error()).find("kvSend"), std::string::npos)
      << describe(unknown_way.error());
  // The top byte of an id numbers a request's attempts (request_retries_max): not the client's.
  auto too_high = h.ask(req, run_atom::value, make_request_spec(client_id_max + 1, prompt, 1));
  ASSERT_FALSE(too_high);
  EXPECT_TRUE(is(too_high.error(), errc::invalid_argument));
  EXPECT_NE(describe(too_high.error()).find("request id"), std::string::npos)
      << describe(too_high.error());
  // Streamed alike, and with no listener at all; a cancel before it runs is refused.
  auto listener = h.sys.spawn([]() -> caf::behavior {
    return {[](tokens_atom, const typed_envelope<wire::TokenBatch>&) {}};
  });
  for (size_t n = 0; n < sample.size_words(); ++n)
    EXPECT_FALSE(h.ask(req, stream_atom::value, cut_spec(n), listener));
  EXPECT_FALSE(h.ask(req, stream_atom::value, sample, caf::actor{}));
  h.sys.spawn([req](caf::event_based_actor* other) { other->send(req, cancel_atom::value); });
  h.sched.run();
  for (auto atom_sample : {envelope{sample_envelope<wire::PrefillDone>()},
                           envelope{sample_envelope<wire::TokenBatch>()},
                           envelope{sample_envelope<wire::RequestFailed>()}}) {
    auto cut = atom_sample.with_words(prefix_words(atom_sample, 1));
    EXPECT_TRUE(
        h.ask_void(req, prefill_done_atom::value, typed_envelope<wire::PrefillDone>::retype(cut)));
    EXPECT_TRUE(h.ask_void(req, tokens_atom::value, typed_envelope<wire::TokenBatch>::retype(cut)));
    EXPECT_TRUE(
        h.ask_void(req, failed_atom::value, typed_envelope<wire::RequestFailed>::retype(cut)));
    EXPECT_TRUE(
        h.ask_void(req, tokens_atom::value, typed_envelope<wire::TokenBatch>::retype(atom_sample)))
        << "not running: unexpected";
  }
  // Still serving: a good request completes.
  auto good = make_envelope<wire::RequestSpec>([](wire::RequestSpec::Builder out) {
    out.setRequestId(77);
    auto tokens = out.initTokens(40);
    for (unsigned i = 0; i < 40; ++i)
      tokens.set(i, i * 3 % 256);
    out.setMaxNewTokens(3);
  });
  auto outcome = h.ask(req, run_atom::value, good);
  ASSERT_TRUE(outcome) << describe(outcome.error());
  auto status = read_as<wire::RequestOutcome>(*outcome, [](wire::RequestOutcome::Reader in) {
    return std::make_pair(in.getStatus(), in.getTokens().size());
  });
  ASSERT_TRUE(status);
  EXPECT_EQ(status->first, wire::Status::COMPLETED);
  EXPECT_EQ(status->second, 3u);
}

TEST(bad_input, a_coupled_instance_refuses_damage_bad_jobs_and_outside_steps) {
  auto cfg = small_cluster(1, 1);
  cfg.nodes.assign(1, node_config{0, 0, 1ull << 20});
  cfg.nodes[0].coupled_instances = 1;
  cfg.conductor.policy = policy_kind::least_loaded;
  cfg.conductor.admission = admission_mode::none;
  cluster_harness h{cfg};
  const auto& worker = h.cl->dir().coupled[0];
  std::vector<target> targets{
      make_target<wire::CoupledJob, false>(h, "coupled/prefill", worker, prefill_atom{}),
      make_target<wire::ReleaseRequest, true>(h, "coupled/release", worker, release_atom{})};
  for (auto& t : targets)
    expect_damage_refused(t);
  const auto before = bad_count(h, worker);
  // A well-formed job whose keys do not match its prompt, and a step from outside.
  auto job = make_envelope<wire::CoupledJob>([](wire::CoupledJob::Builder out) {
    out.setRequestId(5);
    out.initTokens(20).set(0, 1);
    out.initBlockKeys(1);
    out.setMaxNewTokens(2);
  });
  auto refused = h.ask(worker, prefill_atom::value, job);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is(refused.error(), errc::invalid_argument)) << describe(refused.error());
  caf::anon_send(worker, step_atom::value);
  h.sched.run();
  EXPECT_EQ(bad_count(h, worker), before + 2);
  // And it still serves.
  auto results = h.replay({replay::synthesize(record_of({1, 2, 3}, 4), 0, h.workload())});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, replay::outcome_status::completed) << results[0].reason;
}

// Messages an actor takes without answering (or answers only to the one peer entitled to send
// them) report damage through the actor's count of bad messages: each damaged form sent from
// the entitled sender must be counted, and the actor must keep serving.

// Truncated (checksum kept and resealed), bit-flipped, empty and wrong-schema forms of `sample`.
std::vector<envelope> damaged_forms(const envelope& sample) {
  std::vector<envelope> out;
  for (size_t n = 0; n < sample.size_words(); ++n) {
    out.push_back(sample.with_words(prefix_words(sample, n)));
    out.push_back(reseal(sample.schema_id(), prefix_words(sample, n)));
  }
  for (size_t bit = 0; bit < sample.size_bytes() * 8; bit += 11)
    out.push_back(flip(sample, bit));
  out.push_back(envelope{});
  out.push_back(sample_envelope<wire::Ack>());
  return out;
}

// Sends every damaged form of a sample of Schema to `dest` as `as`, under `atom`, and expects
// each counted by `dest` as a bad message.
template <class Schema, class Atom, class Dest, class From>
void expect_counted_one_way(cluster_harness& h, const char* name, const From& as, const Dest& dest,
                            Atom atom) {
  SCOPED_TRACE(name);
  const auto forms = damaged_forms(sample_envelope<Schema>());
  const uint64_t before = bad_count(h, dest);
  for (const auto& damaged : forms)
    h.send_as(as, dest, atom, typed_envelope<Schema>::retype(damaged));
  EXPECT_EQ(bad_count(h, dest), before + forms.size());
}

TEST(bad_input, damaged_one_way_messages_from_their_entitled_senders_are_counted) {
  cluster_harness h{small_cluster(1, 1)};
  const auto& d = h.cl->dir();
  expect_counted_one_way<wire::BlocksGone>(h, "conductor/evicted", d.store_master, d.conductor,
                                           evicted_atom::value);
  expect_counted_one_way<wire::Touch>(h, "block_owner/touch", d.store_master, d.block_owners[0],
                                      touch_atom::value);
  expect_counted_one_way<wire::VerifyBlock>(h, "block_owner/verify", d.store_master,
                                            d.block_owners[0], verify_atom::value);
  expect_counted_one_way<wire::ReleaseRequest>(h, "prefill/cancel", d.conductor, d.prefill[0],
                                               cancel_atom::value);
  expect_all_serving(h);
  auto results = h.replay({replay::synthesize(record_of({1, 2, 3}, 4), 0, h.workload())});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, replay::outcome_status::completed) << results[0].reason;
}

TEST(bad_input, damaged_messages_between_the_stages_of_a_prefill_group_are_counted) {
  auto cfg = small_cluster(2, 1);
  cfg.model.layers = 4;
  cfg.prefill.group_instances = 2;
  cluster_harness h{cfg};
  const auto& head = h.cl->dir().prefill[0];
  const auto& stage = h.cl->dir().prefill[1];
  expect_counted_one_way<wire::StageJob>(h, "prefill/stage", head, stage, stage_atom::value);
  expect_counted_one_way<wire::StageInbox>(h, "prefill/stage_inbox", stage, head,
                                           stage_inbox_atom::value);
  expect_counted_one_way<wire::StageChunk>(h, "prefill/stage_chunk", head, stage,
                                           stage_chunk_atom::value);
  expect_counted_one_way<wire::StageDone>(h, "prefill/stage_done", stage, head,
                                          stage_done_atom::value);
  expect_counted_one_way<wire::StageAbort>(h, "prefill/stage_abort", head, stage,
                                           stage_abort_atom::value);
  auto results = h.replay({replay::synthesize(record_of({1, 2, 3}, 4), 0, h.workload())});
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].status, replay::outcome_status::completed) << results[0].reason;
}

} // namespace
} // namespace crescent::testing
