// Placement of a request: the v0 policy over the conductor's view of load, cache and liveness.
#include "actors/conductor/conductor_state.hpp"
#include "actors/conductor/policy.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"

#include <caf/stateful_actor.hpp>

namespace crescent {

namespace {

constexpr size_t schedule_keys_max = 1u << 16;

struct schedule_args {
  uint64_t request_id = 0;
  uint32_t prompt_tokens = 0;
  std::vector<uint64_t> keys;
};

envelope reply_rejected(uint64_t id, const std::string& reason) {
  return make_envelope<wire::ScheduleReply>([&](wire::ScheduleReply::Builder out) {
    out.setRequestId(id);
    out.setRejected(reason);
  });
}

} // namespace

caf::result<envelope> on_schedule(conductor_ptr self, const envelope& msg) {
  auto& st = self->state;
  auto args = read_as<wire::ScheduleRequest>(msg, [](wire::ScheduleRequest::Reader in) {
    auto keys = in.getBlockKeys();
    if (keys.size() > schedule_keys_max)
      return caf::expected<schedule_args>{
          make_error(errc::limit_exceeded, "schedule request with over 65536 block keys")};
    return caf::expected<schedule_args>{
        schedule_args{in.getRequestId(), in.getPromptTokens(), to_vector(keys)}};
  });
  if (!args)
    return st.bad.refuse(st.name, std::move(args.error()));
  if (args->prompt_tokens == 0)
    return st.bad.refuse(st.name, make_error(errc::invalid_argument, "empty prompt"));
  if (st.in_flight.count(args->request_id) != 0)
    return st.bad.refuse(
        st.name, make_error(errc::already_exists,
                            "request " + std::to_string(args->request_id) + " is already placed"));
  if (st.in_flight.size() >= st.options.requests_in_flight_max) {
    ++st.rejected;
    return reply_rejected(args->request_id, "too many requests in flight");
  }
  std::vector<instance_view> prefill, decode;
  for (uint32_t i = 0; i < st.prefill_queued.size(); ++i) {
    auto node = st.options.prefill_node[i];
    prefill.push_back({node, st.prefill_queued[i], node_alive(self, node)});
  }
  for (uint32_t i = 0; i < st.decode_active.size(); ++i) {
    auto node = st.options.decode_node[i];
    decode.push_back({node, st.decode_active[i], node_alive(self, node)});
  }
  auto p = place_v0(st.index, args->keys, prefill, decode, st.options.prefill_queue_max);
  if (!p.placed) {
    ++st.rejected;
    return reply_rejected(args->request_id, p.reason);
  }
  ++st.placed;
  ++st.prefill_queued[p.prefill];
  ++st.decode_active[p.decode];
  st.in_flight.emplace(args->request_id, placed_request{p.prefill, p.decode, true});
  return make_envelope<wire::ScheduleReply>([&](wire::ScheduleReply::Builder out) {
    out.setRequestId(args->request_id);
    auto placed = out.initPlaced();
    placed.setPrefillInstance(p.prefill);
    placed.setDecodeInstance(p.decode);
    placed.setCachedBlocks(p.cached_blocks);
  });
}

} // namespace crescent
