// Decode reservations belong to the request that made them: nobody else may release them, and
// they are freed when that request's actor ends without releasing (crash, lost process).
#include "actors/decode_worker/decode_worker.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/worker.capnp.h"
#include "support/test_cluster.hpp"

namespace crescent::testing {
namespace {

uint32_t free_pages(cluster_harness& h) {
  auto stats = h.ask(h.cl->dir().decode[0], stats_atom::value);
  EXPECT_TRUE(stats);
  auto n = read_as<wire::WorkerStats>(
      *stats, [](wire::WorkerStats::Reader in) { return in.getFreePages(); });
  return n ? *n : 0;
}

typed_envelope<wire::ReserveRequest> reserve_msg(uint64_t id) {
  return make_envelope<wire::ReserveRequest>([&](wire::ReserveRequest::Builder out) {
    out.setRequestId(id);
    out.setPromptTokens(100);
    out.setMaxNewTokens(29); // 128 positions: 8 pages of 16 tokens
  });
}

typed_envelope<wire::ReleaseRequest> release_msg(uint64_t id) {
  return make_envelope<wire::ReleaseRequest>(
      [&](wire::ReleaseRequest::Builder out) { out.setRequestId(id); });
}

TEST(decode_reservation, only_the_requester_releases_and_its_end_frees_the_pages) {
  cluster_harness h{small_cluster(1, 1)};
  const auto decode = h.cl->dir().decode[0];
  const uint32_t capacity = free_pages(h);
  // A requester that stays alive after its reservation, like a request actor waiting for KV.
  auto reserved = std::make_shared<bool>(false);
  auto holder = h.sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->request(decode, caf::infinite, reserve_atom::value, reserve_msg(5))
        .then([=](const typed_envelope<wire::ReserveReply>&) { *reserved = true; });
    return {[](const caf::message&) {}};
  });
  ASSERT_TRUE(h.run_until([&] { return *reserved; }));
  EXPECT_EQ(free_pages(h), capacity - 8);

  auto err = h.ask_void(decode, release_atom::value, release_msg(5));
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  EXPECT_EQ(free_pages(h), capacity - 8);

  caf::anon_send_exit(holder, caf::exit_reason::kill);
  h.sched.run();
  EXPECT_EQ(free_pages(h), capacity) << "the requester's end frees its reservation";
}

// A request reserves once at an instance: a copy of its ReserveRequest that comes after the
// reservation ended (a duplicate, or one held on the way) makes none, so that no copy of its
// KvReady can start its decode again on pages without its KV (chaos seed 60071, heavier budget).
TEST(decode_reservation, a_copy_of_a_reservation_that_ended_makes_none) {
  cluster_harness h{small_cluster(1, 1)};
  const auto decode = h.cl->dir().decode[0];
  const uint32_t capacity = free_pages(h);
  auto answers = std::make_shared<std::vector<caf::error>>();
  auto reserve = [=](caf::event_based_actor* self) {
    self->request(decode, caf::infinite, reserve_atom::value, reserve_msg(5))
        .then([=](const typed_envelope<wire::ReserveReply>&) { answers->emplace_back(); },
              [=](caf::error& err) { answers->push_back(std::move(err)); });
  };
  auto released = std::make_shared<bool>(false);
  // The request: reserves, releases, and is still alive when the copy comes.
  auto request = h.sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    reserve(self);
    return {[=](const std::string& what) {
      if (what == "release")
        self->request(decode, caf::infinite, release_atom::value, release_msg(5)).then([=]() {
          *released = true;
        });
      else
        reserve(self); // the copy, from the same sender
    }};
  });
  ASSERT_TRUE(h.run_until([&] { return answers->size() == 1; }));
  EXPECT_FALSE(answers->at(0));
  EXPECT_EQ(free_pages(h), capacity - 8);
  caf::anon_send(request, std::string{"release"});
  ASSERT_TRUE(h.run_until([&] { return *released; }));
  EXPECT_EQ(free_pages(h), capacity);
  caf::anon_send(request, std::string{"copy"});
  ASSERT_TRUE(h.run_until([&] { return answers->size() == 2; }));
  EXPECT_TRUE(is(answers->at(1), errc::already_exists)) << describe(answers->at(1));
  EXPECT_EQ(free_pages(h), capacity) << "the copy holds no pages";
  caf::anon_send_exit(request, caf::exit_reason::kill);
  h.sched.run();
}

TEST(decode_reservation, over_budget_reservations_are_refused) {
  auto cfg = small_cluster(1, 1);
  cfg.decode.request_tokens_max = 100;
  cluster_harness h{cfg};
  auto too_big = h.ask(h.cl->dir().decode[0], reserve_atom::value, reserve_msg(1));
  ASSERT_FALSE(too_big);
  EXPECT_TRUE(is(too_big.error(), errc::limit_exceeded)) << describe(too_big.error());
}

// Stands in for a prefill worker: passes a KvReady on to the decode worker as its own.
caf::behavior kv_ready_relay(caf::event_based_actor* self,
                             std::shared_ptr<decode_worker_actor> decode) {
  return {[=](kv_ready_atom a, const typed_envelope<wire::KvReady>& m) {
    auto rp = self->make_response_promise();
    self->request(*decode, caf::infinite, a, m)
        .then([=]() mutable { rp.deliver(caf::unit); },
              [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
    return rp;
  }};
}

// A request of `id` placed on prefill instance 1, with a prompt of 100 tokens.
typed_envelope<wire::ReserveRequest> reserve_from_prefill_1(uint64_t id, uint32_t max_new_tokens) {
  return make_envelope<wire::ReserveRequest>([&](wire::ReserveRequest::Builder out) {
    out.setRequestId(id);
    out.setPromptTokens(100);
    out.setMaxNewTokens(max_new_tokens);
    out.setPrefillInstance(1);
  });
}

typed_envelope<wire::KvReady> kv_ready_of(uint64_t id, uint32_t prompt_tokens) {
  return make_envelope<wire::KvReady>([&](wire::KvReady::Builder out) {
    out.setRequestId(id);
    out.setPromptTokens(prompt_tokens);
    out.setFirstToken(3);
  });
}

// Stands in for a request: reserves with `msg` and holds the reservation (it takes whatever
// comes); returns once the reservation is made, or null if it never is.
caf::actor reserving_request(deterministic_system& h, std::shared_ptr<decode_worker_actor> decode,
                             typed_envelope<wire::ReserveRequest> msg) {
  auto reserved = std::make_shared<bool>(false);
  auto holder = h.sys.spawn([=](caf::event_based_actor* self) -> caf::behavior {
    self->request(*decode, caf::infinite, reserve_atom::value, msg)
        .then([=](const typed_envelope<wire::ReserveReply>&) { *reserved = true; });
    return {[](const caf::message&) {}};
  });
  if (h.run_until([&] { return *reserved; }))
    return holder;
  caf::anon_send_exit(holder, caf::exit_reason::kill);
  return {};
}

TEST(decode_reservation, kv_ready_counts_only_from_the_prefill_instance_the_request_names) {
  deterministic_system h;
  gpu::model_config model;
  auto engine = gpu::make_reference_engine(model, {});
  auto transfer = transport::transfer_engine::create_local(7);
  ASSERT_TRUE(engine && transfer);
  auto pages = storage::dram_pool::create(*transfer, 0, model.page_bytes(), 16);
  ASSERT_TRUE(pages);
  auto decode = std::make_shared<decode_worker_actor>();
  directory dir;
  const auto first = h.sys.spawn(kv_ready_relay, decode);
  const auto second = h.sys.spawn(kv_ready_relay, decode);
  dir.prefill = {caf::actor_cast<prefill_worker_actor>(first),
                 caf::actor_cast<prefill_worker_actor>(second)};
  *decode = spawn_decode_worker(
      h.sys, {0, 0, 8, 1024, true, false},
      {std::move(*engine), std::move(*pages), *transfer, directory_ref::of(std::move(dir)), {}});
  // Request 5 reserves, placed on prefill instance 1.
  auto holder = reserving_request(h, decode, reserve_from_prefill_1(5, 4));
  ASSERT_TRUE(holder);
  // A grant per page, cut from the page pool's one region: nothing registered per page.
  const uint32_t pages_of_request = (100 + 4 - 1 + model.block_tokens - 1) / model.block_tokens;
  EXPECT_EQ((*transfer)->grant_count(), pages_of_request);
  auto ready = kv_ready_of(5, 100);
  auto err = h.ask_void(first, kv_ready_atom::value, ready);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  EXPECT_FALSE(h.ask_void(second, kv_ready_atom::value, ready));
  EXPECT_EQ((*transfer)->grant_count(), 0u) << "the KV has landed: the prefill side's grants end";
  // A copy (the prefill worker sends kv_ready again when the answer does not come) is answered
  // as the first was, and is not bad input; one that names another prompt length is.
  auto bad_messages = [&] {
    auto stats = h.ask(*decode, stats_atom::value);
    EXPECT_TRUE(stats);
    auto n = read_as<wire::WorkerStats>(
        *stats, [](wire::WorkerStats::Reader in) { return in.getBadMessages(); });
    return n ? *n : 0;
  };
  const auto bad_before = bad_messages();
  EXPECT_FALSE(h.ask_void(second, kv_ready_atom::value, ready)) << "a copy";
  EXPECT_EQ(bad_messages(), bad_before);
  err = h.ask_void(second, kv_ready_atom::value, kv_ready_of(5, 99));
  EXPECT_TRUE(is(err, errc::invalid_argument)) << describe(err);
  EXPECT_EQ(bad_messages(), bad_before + 1);
  // So is a copy that comes after the decode ran to the end (one token: at once).
  auto holder_7 = reserving_request(h, decode, reserve_from_prefill_1(7, 1));
  ASSERT_TRUE(holder_7);
  auto ready_7 = kv_ready_of(7, 100);
  EXPECT_FALSE(h.ask_void(second, kv_ready_atom::value, ready_7));
  err = h.ask_void(second, kv_ready_atom::value, ready_7);
  EXPECT_FALSE(err) << "a copy after the end: " << describe(err);
  EXPECT_EQ(bad_messages(), bad_before + 1);
  caf::anon_send_exit(holder_7, caf::exit_reason::kill);
  // A reservation naming an instance the cluster does not have is refused.
  auto nowhere = make_envelope<wire::ReserveRequest>([&](wire::ReserveRequest::Builder out) {
    out.setRequestId(6);
    out.setPromptTokens(10);
    out.setMaxNewTokens(1);
    out.setPrefillInstance(2);
  });
  auto refused = h.ask(*decode, reserve_atom::value, nowhere);
  ASSERT_FALSE(refused);
  EXPECT_TRUE(is(refused.error(), errc::invalid_argument)) << describe(refused.error());
  caf::anon_send_exit(holder, caf::exit_reason::kill);
  caf::anon_send_exit(*decode, caf::exit_reason::kill);
  h.sched.run();
}

} // namespace
} // namespace crescent::testing
