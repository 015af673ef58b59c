#include "apps/replay/workload.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace crescent::replay {

namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

} // namespace

double input_scale(const workload_options& opt) {
  return static_cast<double>(opt.block_tokens) / trace_block_tokens;
}

std::vector<uint32_t> block_tokens_for(uint64_t hash_id, uint32_t count, uint32_t vocab) {
  std::vector<uint32_t> out(count);
  for (uint32_t j = 0; j < count; ++j)
    out[j] = static_cast<uint32_t>(mix(mix(hash_id) + j) % vocab);
  return out;
}

uint64_t arrival_ns_of(const trace_record& r, const workload_options& opt) {
  return static_cast<uint64_t>(static_cast<double>(r.timestamp_ms) * 1e6 / opt.speedup);
}

synthetic_request synthesize(const trace_record& r, uint64_t id, const workload_options& opt) {
  synthetic_request s;
  s.id = id;
  s.arrival_ns = arrival_ns_of(r, opt);
  // ceil(input * B / 512): a partial trace block becomes a partial model block.
  const uint64_t scaled =
      (uint64_t{r.input_tokens} * opt.block_tokens + trace_block_tokens - 1) / trace_block_tokens;
  s.tokens.reserve(scaled);
  for (size_t i = 0; i < r.hash_ids.size() && s.tokens.size() < scaled; ++i) {
    auto n = static_cast<uint32_t>(std::min<uint64_t>(opt.block_tokens, scaled - s.tokens.size()));
    auto block = block_tokens_for(r.hash_ids[i], n, opt.vocab);
    s.tokens.insert(s.tokens.end(), block.begin(), block.end());
  }
  s.max_new_tokens =
      static_cast<uint32_t>(std::max<double>(1.0, std::round(r.output_tokens * opt.output_scale)));
  return s;
}

std::vector<synthetic_request> kv_send_pairs(const std::vector<trace_record>& records,
                                             const workload_options& opt) {
  std::vector<synthetic_request> out;
  out.reserve(2 * records.size());
  for (uint64_t id = 0; id < 2 * records.size(); ++id)
    out.push_back(kv_send_pair_member(records, id, opt));
  return out;
}

synthetic_request kv_send_pair_member(const std::vector<trace_record>& records, uint64_t id,
                                      const workload_options& opt) {
  assert(id / 2 < records.size());
  const auto& record = records[id / 2];
  const bool twin = id % 2 == 1;
  synthetic_request out;
  if (twin) {
    trace_record moved = record;
    for (auto& h : moved.hash_ids)
      h += twin_hash_offset;
    out = synthesize(moved, id, opt);
  } else {
    out = synthesize(record, id, opt);
  }
  out.kv_send = kv_send_pair_way(id);
  return out;
}

wire::KvSend kv_send_pair_way(uint64_t id) {
  const bool after_first = (id / 2) % 2 == 0;
  const bool twin = id % 2 == 1;
  return after_first != twin ? wire::KvSend::AFTER : wire::KvSend::STREAM;
}

} // namespace crescent::replay
