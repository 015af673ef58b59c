#include "apps/analyze/hitrate.hpp"

#include "messages/errors.hpp"

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <limits>
#include <list>
#include <string>
#include <unordered_map>

namespace crescent::analyze {

namespace {

// Any fixed value: keys only ever meet keys of the same run.
constexpr uint64_t root_key = 0x6372657363656e74; // "crescent"

constexpr uint64_t no_limit_blocks = std::numeric_limits<uint64_t>::max();

// H(prev, hash_id, j): the chain's next key. xxh3-64 seeded with the previous key, as the pool's
// block keys (storage/block_key.hpp), so a key stands for its whole prefix.
uint64_t chain_key(uint64_t prev_key, uint64_t hash_id, uint64_t sub_block) {
  const uint64_t words[2] = {hash_id, sub_block};
  return XXH3_64bits_withSeed(words, sizeof words, prev_key);
}

// Cache blocks of trace block `index`: 512 / B, or fewer for the prompt's partial last block
// (ceil(rest / B)); none past the prompt's end, so a record with too many ids cannot count
// tokens it does not have.
uint64_t sub_blocks_of(const replay::trace_record& r, size_t index, uint32_t block_tokens) {
  const uint64_t begin_tokens = uint64_t{index} * replay::trace_block_tokens;
  if (begin_tokens >= r.input_tokens)
    return 0;
  const uint64_t rest_tokens =
      std::min<uint64_t>(r.input_tokens - begin_tokens, replay::trace_block_tokens);
  return (rest_tokens + block_tokens - 1) / block_tokens;
}

// The request's cache-block keys, in prompt order, into `keys` (reused between requests).
void chain_keys(const replay::trace_record& r, uint32_t block_tokens, std::vector<uint64_t>& keys) {
  keys.clear();
  uint64_t prev = root_key;
  for (size_t i = 0; i < r.hash_ids.size(); ++i)
    for (uint64_t j = 0, n = sub_blocks_of(r, i, block_tokens); j < n; ++j) {
      prev = chain_key(prev, r.hash_ids[i], j);
      keys.push_back(prev);
    }
}

// A set of keys in recency order: most recent at the front of `order_`.
class lru_cache {
 public:
  explicit lru_cache(uint64_t capacity_blocks) : capacity_blocks_(capacity_blocks) {}

  bool contains(uint64_t key) const { return where_.count(key) != 0; }

  // Inserts `key` or makes it the most recent; then evicts beyond the capacity.
  void touch(uint64_t key) {
    if (auto i = where_.find(key); i != where_.end()) {
      order_.splice(order_.begin(), order_, i->second);
      return;
    }
    order_.push_front(key);
    where_.emplace(key, order_.begin());
    while (where_.size() > capacity_blocks_) {
      where_.erase(order_.back());
      order_.pop_back();
    }
  }

 private:
  uint64_t capacity_blocks_;
  std::list<uint64_t> order_;
  std::unordered_map<uint64_t, std::list<uint64_t>::iterator> where_;
};

size_t cached_prefix_blocks(const lru_cache& cache, const std::vector<uint64_t>& keys) {
  size_t k = 0;
  while (k < keys.size() && cache.contains(keys[k]))
    ++k;
  return k;
}

// One pass over the trace with one cache. floor(C / B) may be 0 blocks (C < B): such a cache
// keeps nothing, which differs from no limit.
hitrate_row replay_lru(std::span<const replay::trace_record> trace, uint64_t capacity_tokens,
                       uint32_t block_tokens) {
  const uint64_t capacity_blocks = capacity_tokens == unbounded_capacity_tokens
                                       ? no_limit_blocks
                                       : capacity_tokens / block_tokens;
  lru_cache cache{capacity_blocks};
  hitrate_row row{capacity_tokens, 0, 0};
  std::vector<uint64_t> keys;
  for (const auto& r : trace) {
    chain_keys(r, block_tokens, keys);
    const uint64_t reused_blocks = cached_prefix_blocks(cache, keys);
    row.reused_tokens += std::min<uint64_t>(reused_blocks * block_tokens, r.input_tokens);
    row.prompt_tokens += r.input_tokens;
    for (uint64_t key : keys)
      cache.touch(key);
  }
  return row;
}

} // namespace

double hitrate_row::hit_rate() const {
  return prompt_tokens == 0
             ? 0.0
             : static_cast<double>(reused_tokens) / static_cast<double>(prompt_tokens);
}

caf::error check_block_tokens(uint32_t block_tokens) {
  if (block_tokens == 0 || replay::trace_block_tokens % block_tokens != 0)
    return make_error(errc::invalid_argument,
                      "--block-tokens " + std::to_string(block_tokens) +
                          ": must divide the trace's 512-token blocks (1, 2, 4, ..., 256, 512)");
  return {};
}

caf::expected<std::vector<hitrate_row>>
prefix_hit_rates(std::span<const replay::trace_record> trace,
                 std::span<const uint64_t> capacities_tokens, uint32_t block_tokens) {
  if (auto err = check_block_tokens(block_tokens))
    return err;
  std::vector<hitrate_row> rows;
  rows.reserve(capacities_tokens.size());
  for (uint64_t capacity : capacities_tokens)
    rows.push_back(replay_lru(trace, capacity, block_tokens));
  return rows;
}

std::optional<uint64_t> parse_capacity_tokens(std::string_view word) {
  if (word == "unbounded")
    return unbounded_capacity_tokens;
  if (word.empty() || word.find_first_not_of("0123456789") != std::string_view::npos)
    return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  if (ec != std::errc{} || end != word.data() + word.size())
    return std::nullopt; // past 2^64 - 1
  return value;
}

} // namespace crescent::analyze
