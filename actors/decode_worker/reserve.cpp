// Reservations of decode KV memory, and their release.
#include "actors/decode_worker/decode_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/worker.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace crescent {

namespace {

struct reserve_args {
  uint64_t request_id;
  uint32_t prompt_tokens;
  uint32_t max_new_tokens;
  uint32_t prefill_instance;
};

// A grant per page, under its own key, cut from the page pool's one registered region (no
// memory registration per page): these handles are what the prefill side may write.
caf::error grant_pages(decode_ptr self, reservation& r) {
  auto& st = self->state;
  for (const auto& page : r.pool_pages) {
    auto grant = st.parts.transfer->grant(page);
    if (!grant)
      return std::move(grant.error());
    r.grants.push_back(*grant);
  }
  return caf::none;
}

caf::expected<reservation> make_reservation(decode_ptr self, const reserve_args& a) {
  auto& st = self->state;
  const uint32_t block = st.parts.engine->config().block_tokens;
  reservation r;
  r.request_id = a.request_id;
  r.prompt_tokens = a.prompt_tokens;
  r.max_new_tokens = a.max_new_tokens;
  r.prefill_instance = a.prefill_instance;
  // The last output token is never fed back, so its KV needs no room.
  const uint32_t positions = a.prompt_tokens + a.max_new_tokens - 1;
  const uint32_t count = (positions + block - 1) / block;
  r.pool_pages = st.parts.kv_pages->allocate(count);
  auto undo = [&](caf::error err) {
    revoke_grants(self, r);
    for (const auto& p : r.pool_pages)
      [[maybe_unused]] auto e = st.parts.kv_pages->free(p);
    return caf::expected<reservation>{std::move(err)};
  };
  if (r.pool_pages.size() != count)
    return undo(make_error(errc::no_space,
                           "decode instance " + std::to_string(st.options.instance) +
                               " has no room for " + std::to_string(count) + " more KV pages"));
  for (const auto& p : r.pool_pages) {
    auto mem = st.parts.kv_pages->slot_memory(p);
    if (!mem)
      return undo(std::move(mem.error()));
    r.page_ptrs.push_back(mem->data());
  }
  if (auto err = grant_pages(self, r))
    return undo(std::move(err));
  return r;
}

typed_envelope<wire::ReserveReply> reply_of(decode_ptr self, const reservation& r) {
  const uint32_t block = self->state.parts.engine->config().block_tokens;
  return make_envelope<wire::ReserveReply>([&](wire::ReserveReply::Builder out) {
    out.setRequestId(r.request_id);
    out.setBlockTokens(block);
    auto pages = out.initPages(static_cast<unsigned>(r.grants.size()));
    for (unsigned i = 0; i < r.grants.size(); ++i)
      transport::to_wire(r.grants[i], pages[i]);
  });
}

} // namespace

decode_state::~decode_state() {
  if (!parts.transfer)
    return;
  for (auto& [id, r] : reservations)
    for (const auto& g : r.grants)
      if (auto err = parts.transfer->revoke(g))
        spdlog::error("decode_worker: revoking a page grant at exit failed: {}", describe(err));
}

void revoke_grants(decode_ptr self, reservation& r) {
  for (const auto& g : r.grants)
    if (auto err = self->state.parts.transfer->revoke(g))
      spdlog::error("decode_worker: revoking a page grant failed: {}", describe(err));
  r.grants.clear();
}

caf::result<typed_envelope<wire::ReserveReply>>
on_reserve(decode_ptr self, const typed_envelope<wire::ReserveRequest>& msg) {
  auto& st = self->state;
  auto a = read_as<wire::ReserveRequest>(msg, [](wire::ReserveRequest::Reader in) {
    return reserve_args{in.getRequestId(), in.getPromptTokens(), in.getMaxNewTokens(),
                        in.getPrefillInstance()};
  });
  if (!a)
    return st.bad.refuse(st.name, std::move(a.error()));
  if (a->prompt_tokens == 0 || a->max_new_tokens == 0)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "a request needs a prompt and at least one output"));
  if (a->prefill_instance >= st.parts.dir->prefill.size())
    return st.bad.refuse(
        st.name, make_error(errc::invalid_argument, "a reservation names prefill instance " +
                                                        std::to_string(a->prefill_instance) +
                                                        ", which the cluster does not have"));
  if (uint64_t{a->prompt_tokens} + a->max_new_tokens > st.options.request_tokens_max)
    return st.bad.refuse(
        st.name, make_error(errc::limit_exceeded,
                            "prompt + output of " +
                                std::to_string(uint64_t{a->prompt_tokens} + a->max_new_tokens) +
                                " tokens exceeds the per-request budget of " +
                                std::to_string(st.options.request_tokens_max)));
  // A copy of a reservation its request still waits on (the answer to the first was lost on
  // the way) gets the same answer: the same pages, nothing allocated twice.
  if (auto i = st.reservations.find(a->request_id); i != st.reservations.end() &&
                                                    !i->second.active &&
                                                    sent_by(self, i->second.requester.address()))
    return reply_of(self, i->second);
  // Any other copy of a reservation that is made or was: the network's doing, not a bad message.
  if (st.reservations.count(a->request_id) != 0 || st.reserved.contains(a->request_id))
    return make_error(errc::already_exists, "decode instance " +
                                                std::to_string(st.options.instance) +
                                                " has reserved for request " +
                                                std::to_string(a->request_id) + " already");
  auto requester = caf::actor_cast<request_actor>(self->current_sender());
  if (!requester)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument,
                                             "a reservation needs a requester for its tokens"));
  auto r = make_reservation(self, *a);
  if (!r)
    return std::move(r.error()); // out of memory is load, not a bad message
  st.reserved.insert(a->request_id);
  // A request that ends without releasing (it crashed, its process died) must not hold memory.
  self->monitor(requester);
  r->requester = std::move(requester);
  auto reply = reply_of(self, *r);
  st.reservations.emplace(a->request_id, std::move(*r));
  return reply;
}

void drop_reservation(decode_ptr self, uint64_t request_id) {
  auto& st = self->state;
  auto i = st.reservations.find(request_id);
  if (i == st.reservations.end())
    return;
  revoke_grants(self, i->second);
  for (const auto& p : i->second.pool_pages)
    if (auto err = st.parts.kv_pages->free(p))
      spdlog::error("decode_worker: freeing a KV page failed: {}", describe(err));
  st.reservations.erase(i);
  st.active.erase(std::remove(st.active.begin(), st.active.end(), request_id), st.active.end());
}

caf::result<void> on_release(decode_ptr self, const typed_envelope<wire::ReleaseRequest>& msg) {
  auto& st = self->state;
  auto id = read_as<wire::ReleaseRequest>(
      msg, [](wire::ReleaseRequest::Reader in) { return in.getRequestId(); });
  if (!id)
    return st.bad.refuse(st.name, std::move(id.error()));
  auto i = st.reservations.find(*id);
  if (i == st.reservations.end())
    return caf::unit; // releasing twice, or after the end, is harmless
  // Only the request that made a reservation may give it back.
  if (auto err =
          refuse_unless_sent_by(self, i->second.requester.address(),
                                "the release of request " + std::to_string(*id), "its requester"))
    return err;
  drop_reservation(self, *id);
  return caf::unit;
}

} // namespace crescent
