#include "actors/conductor/estimate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cassert>
#include <limits>

namespace crescent {

namespace {

// A decode instance's batch when the request joins it: the requests it holds then (all under
// current_load; those not finished by then under predicted_load), and this one.
struct decode_batch {
  uint32_t batch = 1;
  uint64_t context_tokens = 0;
  uint64_t reserved_tokens = 0; // memory held now, whoever finishes later
};

decode_batch batch_at(const schedule_view& v, const decode_view& d, const request_view& r,
                      int64_t arrival_ns) {
  decode_batch b;
  // The request's own context over its life: its prompt, and on average half its output.
  b.context_tokens = r.prompt_tokens + r.max_new_tokens / 2;
  if (!d.tokens_before.empty()) {
    // In end order with their sums: those that finish by then are a prefix of them.
    assert(d.tokens_before.size() == d.requests.size() + 1);
    size_t gone = 0;
    if (v.admission == admission_mode::predicted_load)
      gone = static_cast<size_t>(
          std::upper_bound(d.requests.begin(), d.requests.end(), arrival_ns,
                           [](int64_t t, const decode_load& x) { return t < x.end_ns; }) -
          d.requests.begin());
    b.reserved_tokens = d.tokens_before.back();
    b.batch += static_cast<uint32_t>(d.requests.size() - gone);
    b.context_tokens += d.tokens_before.back() - d.tokens_before[gone];
    return b;
  }
  for (const auto& x : d.requests) {
    b.reserved_tokens += x.tokens;
    if (v.admission == admission_mode::predicted_load && x.end_ns <= arrival_ns)
      continue;
    ++b.batch;
    b.context_tokens += x.tokens;
  }
  return b;
}

std::string seconds(uint64_t ns) {
  return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9);
}

uint64_t ceil_ms(uint64_t ns) {
  return (ns + 999'999) / 1'000'000;
}

// When the chosen decode instance next loses a request: a retry's earliest chance of a smaller
// batch.
uint64_t next_decode_end_ms(const schedule_view& v, const decode_view& d) {
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const auto& x : d.requests)
    if (x.end_ns > v.now_ns)
      first = std::min(first, x.end_ns);
  return first == std::numeric_limits<int64_t>::max()
             ? 1
             : std::max<uint64_t>(1, ceil_ms(static_cast<uint64_t>(first - v.now_ns)));
}

decision rejected(std::string reason, uint64_t retry_after_ms) {
  decision d;
  d.reason = std::move(reason);
  d.retry_after_ms = retry_after_ms;
  return d;
}

} // namespace

bool has_room(const schedule_view& v, uint32_t instance) {
  const auto& p = v.prefill[instance];
  return p.alive && p.queued_jobs < v.prefill_queue_max;
}

bool lighter(const schedule_view& v, uint32_t a, uint32_t b) {
  return v.coupled && v.decode[a].requests.size() < v.decode[b].requests.size();
}

uint32_t reused_tokens(const schedule_view& v, const request_view& r, uint32_t blocks) {
  if (r.prompt_tokens == 0)
    return 0;
  return static_cast<uint32_t>(
      std::min<uint64_t>(uint64_t{blocks} * v.block_tokens, r.prompt_tokens - 1));
}

ttft_estimate predicted_ttft(const schedule_view& v, const request_view& r, uint32_t instance,
                             const prefix_load& load) {
  const auto& m = *v.model;
  // The backlog delays a pull that starts now; behind a queue, the running pulls are taken to
  // have drained by the time this one starts.
  const auto& p = v.prefill[instance];
  const uint32_t holder = load.holder;
  const uint64_t backlog =
      p.queue_ns == 0 && holder < v.pull_backlog_bytes.size() ? v.pull_backlog_bytes[holder] : 0;
  const uint32_t blocks = load.local + load.pulled;
  const uint64_t compute_ns = m.prefill_ns(r.prompt_tokens, reused_tokens(v, r, blocks));
  const uint64_t load_ns = m.ssd_read_ns(load.local_on_ssd) + m.load_ns(load.local, false) +
                           m.ssd_read_ns(load.pulled_on_ssd) +
                           m.pull_ns(load.pulled, holder, p.node, backlog);
  const auto handoff = m.handoff(r.prompt_tokens, compute_ns, load_ns, blocks);
  return {p.queue_ns + load_ns + compute_ns + handoff.tail_ns, handoff.burst_ns};
}

prefill_choice local_choice(const schedule_view& v, const request_view& r, uint32_t instance,
                            const prefix_match& m) {
  prefill_choice c;
  c.instance = instance;
  const uint32_t node = v.prefill[instance].node;
  c.local_blocks = m.length[node];
  c.reuse_blocks = c.local_blocks;
  const auto t = predicted_ttft(v, r, instance, {c.local_blocks, m.on_ssd[node]});
  c.ttft_ns = t.ttft_ns;
  c.handoff_burst_ns = t.handoff_burst_ns;
  return c;
}

std::optional<decode_choice> choose_decode(const schedule_view& v, const request_view& r,
                                           const prefill_choice& prefill) {
  const uint64_t needs = uint64_t{r.prompt_tokens} + r.max_new_tokens;
  const int64_t arrival = v.now_ns + static_cast<int64_t>(prefill.ttft_ns);
  // The TBT of instance i with this request, or none without memory for it.
  const auto tbt_of = [&](uint32_t i) -> std::optional<uint64_t> {
    const auto& d = v.decode[i];
    if (!d.alive)
      return std::nullopt;
    const auto b = batch_at(v, d, r, arrival);
    if (b.reserved_tokens + needs > d.capacity_tokens)
      return std::nullopt;
    return v.model->decode_step_ns(b.batch, b.context_tokens);
  };
  std::optional<decode_choice> best;
  for (uint32_t i = 0; i < v.decode.size(); ++i)
    if (const auto tbt = tbt_of(i); tbt && (!best || *tbt < best->tbt_ns))
      best = decode_choice{i, *tbt, 0};
  if (!best || v.decode_tbt_slack <= 0 || prefill.handoff_burst_ns == 0)
    return best;
  // A second pass: the slack is relative to the lowest TBT, known only after the first.
  auto limit = static_cast<uint64_t>(static_cast<double>(best->tbt_ns) * (1 + v.decode_tbt_slack));
  if (v.admission != admission_mode::none && best->tbt_ns <= v.slo.tbt_ns)
    limit = std::min(limit, v.slo.tbt_ns);
  const auto own = handoff_burst::ending_at(arrival, prefill.handoff_burst_ns);
  const auto crowded_at = [&](uint32_t i) {
    uint64_t crowded = 0;
    for (const auto& h : v.decode[i].inbound) {
      const int64_t from = std::max(h.start_ns, own.start_ns);
      const int64_t to = std::min(h.end_ns, own.end_ns);
      crowded += to > from ? static_cast<uint64_t>(to - from) : 0;
    }
    return crowded;
  };
  best->crowded_ns = crowded_at(best->instance);
  for (uint32_t i = 0; i < v.decode.size() && best->crowded_ns > 0; ++i) {
    const auto tbt = tbt_of(i);
    if (!tbt || *tbt > limit)
      continue;
    const uint64_t crowded = crowded_at(i);
    if (crowded < best->crowded_ns || (crowded == best->crowded_ns && *tbt < best->tbt_ns))
      best = decode_choice{i, *tbt, crowded};
  }
  return best;
}

namespace {

// A coupled instance decodes what it prefills: its batch then, whatever its memory holds now (a
// request it cannot hold yet waits in its queue).
decode_choice coupled_decode(const schedule_view& v, const request_view& r, uint32_t instance,
                             uint64_t ttft_ns) {
  const auto b = batch_at(v, v.decode[instance], r, v.now_ns + static_cast<int64_t>(ttft_ns));
  return {instance, v.model->decode_step_ns(b.batch, b.context_tokens)};
}

} // namespace

decision complete(const schedule_view& v, const request_view& r,
                  std::optional<prefill_choice> prefill) {
  if (!prefill)
    return rejected("no live prefill instance has room in its queue", 1000);
  auto dec = v.coupled ? std::optional{coupled_decode(v, r, prefill->instance, prefill->ttft_ns)}
                       : choose_decode(v, r, *prefill);
  if (!dec)
    return rejected("no live decode instance has KV memory for " +
                        std::to_string(uint64_t{r.prompt_tokens} + r.max_new_tokens) + " tokens",
                    1000);
  if (v.admission != admission_mode::none) {
    if (prefill->ttft_ns > v.slo.ttft_ns)
      return rejected("predicted TTFT " + seconds(prefill->ttft_ns) + " exceeds the SLO of " +
                          seconds(v.slo.ttft_ns),
                      ceil_ms(prefill->ttft_ns - v.slo.ttft_ns));
    if (dec->tbt_ns > v.slo.tbt_ns)
      return rejected("predicted TBT " + seconds(dec->tbt_ns) + " exceeds the SLO of " +
                          seconds(v.slo.tbt_ns),
                      next_decode_end_ms(v, v.decode[dec->instance]));
  }
  decision d;
  d.placed = true;
  d.prefill = prefill->instance;
  d.decode = dec->instance;
  d.reuse_blocks = prefill->reuse_blocks;
  d.local_blocks = prefill->local_blocks;
  d.pull = prefill->pull;
  d.pull_from = prefill->pull_from;
  d.predicted_ttft_ns = prefill->ttft_ns;
  d.predicted_tbt_ns = dec->tbt_ns;
  d.handoff_burst_ns = prefill->handoff_burst_ns;
  return d;
}

} // namespace crescent
