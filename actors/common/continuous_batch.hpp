// What the two continuous batches share (the decode worker's and the coupled worker's): which
// requests step next, and how their tokens reach their request actors.
#pragma once

#include "actors/request/request_actor.hpp"
#include "messages/schema/request.capnp.h"

#include <caf/send.hpp>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace crescent {

/// Up to `count` of `ids`, from `rotation` on and round again, moving `rotation` past them: when
/// more requests run than a step takes, none starves.
inline std::vector<uint64_t> rotating_batch(const std::vector<uint64_t>& ids, size_t& rotation,
                                            size_t count) {
  std::vector<uint64_t> batch;
  const size_t n = ids.size();
  const size_t take = std::min(n, count);
  if (take == 0)
    return batch;
  rotation %= n;
  for (size_t k = 0; k < take; ++k)
    batch.push_back(ids[(rotation + k) % n]);
  rotation += take;
  return batch;
}

/// Sends request `request_id`'s `tokens`, output indexes `first` on, to `to` (its request actor,
/// or a streamed request's listener) from `self` (the request takes tokens only from its decode
/// instance); `final`: the last of them.
template <class Self, class Handle>
void send_token_batch(Self* self, const Handle& to, uint64_t request_id,
                      std::span<const uint32_t> tokens, bool final, uint32_t first) {
  auto msg = make_envelope<wire::TokenBatch>([&](wire::TokenBatch::Builder out) {
    out.setRequestId(request_id);
    auto list = out.initTokens(static_cast<unsigned>(tokens.size()));
    for (unsigned i = 0; i < tokens.size(); ++i)
      list.set(i, tokens[i]);
    out.setFinal(final);
    out.setFirst(first);
  });
  self->send(to, tokens_atom::value, msg);
}

} // namespace crescent
