// The sequence-only prefix hit rate of one global LRU cache over a trace: the method of the
// Mooncake paper's Fig. 9, and a check for the simulator's replay (REFERENCE.md's table).
//
// It ignores time, placement and load: requests are taken in file order and every one sees the
// same cache. Each request's blocks get chained keys, key_0 = H(root, hash_id_0) and
// key_i = H(key_{i-1}, hash_id_i), so two requests share key i exactly when their first i + 1
// hash ids are equal. A request reuses the longest prefix of its keys that is in the cache,
// counted as min(k * block_tokens, input_length) tokens (a cached partial last block counts
// only the tokens it has); then all its blocks, in order, are inserted or refreshed (moved to
// most recent), and after each insertion the least recently used blocks beyond the capacity of
// floor(capacity_tokens / block_tokens) blocks are evicted. Hit rate = reused tokens / all
// prompt tokens.
//
// Smaller cache blocks: with block_tokens B below 512 (B must divide 512), trace block i
// becomes 512 / B cache blocks, sub-block j keyed H(prev, hash_id_i, j), prev being the key of
// the sub-block before it; a partial last trace block (input_length not a multiple of 512) gets
// ceil(rest / B) sub-blocks. With B = 512, j is always 0 and this is the chain above.
#pragma once

#include "apps/replay/trace.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace crescent::analyze {

/// A capacity of 0 tokens means no limit.
inline constexpr uint64_t unbounded_capacity_tokens = 0;

struct hitrate_row {
  uint64_t capacity_tokens = 0; // unbounded_capacity_tokens: no limit
  uint64_t reused_tokens = 0;
  uint64_t prompt_tokens = 0;

  /// reused / prompt tokens; 0 for an empty trace.
  double hit_rate() const;
};

/// Checks block_tokens: positive and a divisor of the trace's 512-token blocks.
caf::error check_block_tokens(uint32_t block_tokens);

/// One row per capacity, in the order given. Errors: a bad block_tokens (check_block_tokens).
caf::expected<std::vector<hitrate_row>>
prefix_hit_rates(std::span<const replay::trace_record> trace,
                 std::span<const uint64_t> capacities_tokens, uint32_t block_tokens);

/// A capacity as written on the command line: a non-negative integer (tokens), or `unbounded`
/// (the same as 0). Nothing else, not even a sign or spaces.
std::optional<uint64_t> parse_capacity_tokens(std::string_view word);

} // namespace crescent::analyze
