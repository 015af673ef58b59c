// The coupled instance's step loop: emit what the last step computed, admit waiting requests
// whose pages can be had, then compute one step of prefills and decodes (coupled_worker.hpp).
#include "actors/common/continuous_batch.hpp"
#include "actors/common/spawn_placement.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/coupled_worker/coupled_state.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace crescent {

namespace {

// A piece of a prompt a step computes.
struct prompt_chunk {
  uint64_t request_id = 0;
  uint32_t tokens = 0;
};

void send_first_token(coupled_ptr self, const coupled_seq& s, uint32_t token) {
  auto msg = make_envelope<wire::PrefillDone>([&](wire::PrefillDone::Builder out) {
    out.setRequestId(s.request_id);
    out.setFirstToken(token);
    out.setComputedTokens(static_cast<uint32_t>(s.tokens.size()) - s.reused_tokens);
    out.setReusedTokens(s.reused_tokens);
    out.setComputeNs(s.prefill_ns);
    out.setQueueNs(static_cast<uint64_t>(std::max<int64_t>(0, s.prefill_start_ns - s.accepted_ns)));
  });
  self->send(s.requester, prefill_done_atom::value, msg);
}

// Tells the conductor, as a prefill instance would, that the prompt is computed: what it cost,
// which of its blocks this instance's cache now holds and which it evicted since.
void report_prefill(coupled_ptr self, const coupled_seq& s, const std::vector<block_key>& cached) {
  auto& st = self->state;
  const auto evicted = st.cache->take_evicted();
  auto msg = make_envelope<wire::PrefillReport>([&](wire::PrefillReport::Builder out) {
    out.setRequestId(s.request_id);
    out.setInstance(st.options.instance);
    out.setNode(st.options.node);
    out.setOk(true);
    out.setComputedTokens(static_cast<uint32_t>(s.tokens.size()) - s.reused_tokens);
    out.setReusedTokens(s.reused_tokens);
    out.setComputeNs(s.prefill_ns);
    auto keys = out.initStoredKeys(static_cast<unsigned>(cached.size()));
    for (unsigned i = 0; i < cached.size(); ++i)
      write_key(keys[i], cached[i]);
    auto dropped = out.initDroppedKeys(static_cast<unsigned>(evicted.size()));
    for (unsigned i = 0; i < evicted.size(); ++i)
      write_key(dropped[i], evicted[i]);
  });
  self->request(st.parts.dir->conductor, control_timeout, report_atom::value, msg)
      .then([] {},
            [](caf::error& err) {
              spdlog::warn("coupled_worker: report not acknowledged: {}", describe(err));
            });
}

void emit_pending(coupled_ptr self) {
  auto& st = self->state;
  auto pending = std::move(st.pending);
  st.pending.clear();
  for (const auto& e : pending) {
    auto i = st.running.find(e.request_id);
    if (i == st.running.end())
      continue; // released while its token was computed
    const auto& to = i->second.requester;
    i->second.sent = e.index + 1;
    if (e.first)
      send_first_token(self, i->second, e.token);
    else
      send_token_batch(self, to, e.request_id, std::span{&e.token, 1}, e.final, e.index);
    if (e.first && e.final)
      send_token_batch(self, to, e.request_id, {}, true, 1);
    if (e.final)
      drop_request(self, e.request_id);
  }
}

// First come, first served: the head of the queue waits for its pages, and those behind it wait
// for it (as vLLM's FCFS scheduler).
void admit(coupled_ptr self) {
  auto& st = self->state;
  const uint32_t block = st.parts.engine->config().block_tokens;
  while (!st.waiting.empty() && st.running.size() < st.options.batch_max) {
    auto& s = st.waiting.front();
    const auto prompt = static_cast<uint32_t>(s.tokens.size());
    const uint32_t positions = prompt + s.max_new_tokens - 1;
    // At least the prompt's last token is computed, for its logits; a shared page is never
    // written, so what is shared ends at a block before it.
    auto lease = st.cache->acquire(s.keys, (prompt - 1) / block, (positions + block - 1) / block);
    if (!lease)
      return;
    s.pages = std::move(lease->pages);
    for (auto p : s.pages)
      s.page_ptrs.push_back(st.page_memory[p]);
    s.reused_tokens = lease->shared * block;
    s.length = s.reused_tokens;
    const auto id = s.request_id;
    st.running.emplace(id, std::move(s));
    st.waiting.pop_front();
    st.prefilling.push_back(id);
  }
}

// Prompt chunks for a step, first come first, within `budget_tokens`: whole prompts only (at
// least one, whatever its size) or pieces of them.
std::vector<prompt_chunk> plan_prefill(const coupled_state& st, uint32_t budget_tokens,
                                       bool whole_prompts) {
  std::vector<prompt_chunk> out;
  uint32_t used = 0;
  for (auto id : st.prefilling) {
    const auto& s = st.running.at(id);
    const auto left = static_cast<uint32_t>(s.tokens.size()) - s.length;
    uint32_t n = whole_prompts ? left : std::min(left, budget_tokens - used);
    if (n == 0 || (whole_prompts && !out.empty() && used + n > budget_tokens))
      break;
    out.push_back({id, n});
    used += n;
  }
  return out;
}

uint64_t run_decode(coupled_ptr self, const std::vector<uint64_t>& batch) {
  auto& st = self->state;
  std::vector<gpu::sequence_ref> seqs;
  std::vector<uint32_t> inputs;
  for (auto id : batch) {
    auto& s = st.running.at(id);
    seqs.push_back({s.page_ptrs, s.length});
    inputs.push_back(s.next_input);
  }
  yield_before_compute(st.options.own_thread);
  auto out = st.parts.engine->decode(seqs, inputs);
  if (!out) {
    // The engine refused the batch: a broken invariant, not a bad request. Fail the batch's
    // requests with the reason rather than spin on it.
    for (auto id : batch)
      fail_request(self, id, "decode failed: " + describe(out.error()));
    return 0;
  }
  for (size_t k = 0; k < batch.size(); ++k) {
    auto& s = st.running.at(batch[k]);
    s.length += 1;
    s.next_input = out->next_tokens[k];
    s.generated += 1;
    const bool final = s.generated >= s.max_new_tokens;
    if (final)
      std::erase(st.decoding, batch[k]);
    st.pending.push_back({batch[k], out->next_tokens[k], false, final, s.generated - 1});
  }
  return out->compute_ns;
}

// The prompt is computed: its whole blocks go into the cache, it decodes from the next step on.
void end_prefill(coupled_ptr self, coupled_seq& s, uint32_t first_token) {
  auto& st = self->state;
  const uint32_t block = st.parts.engine->config().block_tokens;
  std::vector<block_key> cached;
  for (size_t p = s.reused_tokens / block; p < s.tokens.size() / block; ++p)
    if (st.cache->publish(s.pages[p], s.keys[p]))
      cached.push_back(s.keys[p]);
  report_prefill(self, s, cached);
  std::erase(st.prefilling, s.request_id);
  s.prefilled = true;
  s.next_input = first_token;
  s.generated = 1;
  const bool final = s.generated >= s.max_new_tokens;
  if (!final)
    st.decoding.push_back(s.request_id);
  st.pending.push_back({s.request_id, first_token, true, final, 0});
}

// Computes the chunks; returns their time and, in `done`, the chunks that computed.
uint64_t run_prefill(coupled_ptr self, const std::vector<prompt_chunk>& chunks,
                     std::vector<prompt_chunk>& done) {
  auto& st = self->state;
  uint64_t ns = 0;
  for (const auto& c : chunks) {
    auto& s = st.running.at(c.request_id);
    const std::span<const uint32_t> tokens{s.tokens.data() + s.length, c.tokens};
    yield_before_compute(st.options.own_thread);
    auto out = st.parts.engine->prefill({s.page_ptrs, s.length}, tokens);
    if (!out) {
      fail_request(self, c.request_id, "prefill failed: " + describe(out.error()));
      continue;
    }
    ns += out->compute_ns;
    s.length += c.tokens;
    done.push_back(c);
    if (s.length == s.tokens.size())
      s.next_input = out->next_token; // the first token, once the step's time is known
  }
  return ns;
}

} // namespace

void on_step(coupled_ptr self) {
  auto& st = self->state;
  st.stepping = false;
  const int64_t now = clock_ns(self);
  emit_pending(self);
  admit(self);
  std::vector<uint64_t> decode_batch;
  std::vector<prompt_chunk> chunks;
  if (st.options.chunked_prefill) {
    decode_batch = rotating_batch(st.decoding, st.rotation,
                                  std::min(st.options.batch_max, st.options.token_budget));
    chunks = plan_prefill(st, st.options.token_budget - static_cast<uint32_t>(decode_batch.size()),
                          false);
  } else if (!st.prefilling.empty()) {
    chunks = plan_prefill(st, st.options.token_budget, true);
  } else {
    decode_batch = rotating_batch(st.decoding, st.rotation, st.options.batch_max);
  }
  if (decode_batch.empty() && chunks.empty())
    return; // idle until a job comes or pages are released
  uint64_t step_ns = decode_batch.empty() ? 0 : run_decode(self, decode_batch);
  std::vector<prompt_chunk> prefilled;
  step_ns += run_prefill(self, chunks, prefilled);
  // The step's time is shared by the tokens it computed, a decode's one token and a chunk's many
  // alike: a prompt's prefill time is its share of each step that computed part of it, so that
  // the shares add up to the instance's busy time.
  uint64_t step_tokens = decode_batch.size();
  for (const auto& c : prefilled)
    step_tokens += c.tokens;
  for (const auto& c : prefilled) {
    auto& s = st.running.at(c.request_id);
    if (s.prefill_steps++ == 0)
      s.prefill_start_ns = now;
    s.prefill_ns += step_ns * c.tokens / step_tokens;
    if (s.length == s.tokens.size())
      end_prefill(self, s, s.next_input);
  }
  st.compute_ns_total += step_ns;
  wake(self, step_ns);
}

} // namespace crescent
