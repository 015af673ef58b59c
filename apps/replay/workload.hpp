// Turning trace records into prompts for a small model. Lengths are scaled so that one trace
// block (512 tokens) becomes one model block (block_tokens tokens); token ids are drawn from the
// block's hash id, so equal ids give equal token blocks and the trace's prefix sharing becomes
// real KV reuse.
#pragma once

#include "apps/replay/trace.hpp"
#include "messages/schema/common.capnp.h"

#include <cstdint>
#include <vector>

namespace crescent::replay {

struct workload_options {
  uint32_t block_tokens = 16; // model tokens per trace block
  uint32_t vocab = 256;
  double output_scale = 1.0; // output lengths are multiplied by this, at least 1 token
  double speedup = 1.0;      // arrivals happen this many times faster than in the trace
};

struct synthetic_request {
  uint64_t id = 0;
  uint64_t arrival_ns = 0; // after the start of the replay, already sped up
  std::vector<uint32_t> tokens;
  uint32_t max_new_tokens = 1;
  wire::KvSend kv_send = wire::KvSend::CONFIG; // how its prefill sends KV (an A/B's twins)
};

/// Factor applied to input lengths: block_tokens / 512.
double input_scale(const workload_options& opt);

std::vector<uint32_t> block_tokens_for(uint64_t hash_id, uint32_t count, uint32_t vocab);

/// When a record's request arrives after the start of the replay (sped up).
uint64_t arrival_ns_of(const trace_record& r, const workload_options& opt);

synthetic_request synthesize(const trace_record& r, uint64_t id, const workload_options& opt);

/// Added to a record's hash ids for its twin: far above any trace's.
inline constexpr uint64_t twin_hash_offset = uint64_t{1} << 40;

/// An A/B of how prefill sends KV, in one run: each record becomes two requests arriving
/// together, ids 2i and 2i+1, the second of its twin (hash ids + twin_hash_offset: as long, its
/// own tokens, and sharing prefixes with the other twins as the record does with the others, so
/// neither finds the other's KV cached). One is sent after prefill and one streamed, which one
/// alternating by record, so that each way gets the first id as often.
std::vector<synthetic_request> kv_send_pairs(const std::vector<trace_record>& records,
                                             const workload_options& opt);

/// How request `id` of kv_send_pairs sends its KV (AFTER or STREAM).
wire::KvSend kv_send_pair_way(uint64_t id);

/// Request `id` of kv_send_pairs(records, opt), made alone (asserts id < 2 * records.size()).
synthetic_request kv_send_pair_member(const std::vector<trace_record>& records, uint64_t id,
                                      const workload_options& opt);

} // namespace crescent::replay
