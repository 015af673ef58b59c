// crescent analyze hitrate's computation (apps/analyze/hitrate.hpp): hand-built traces with
// hand-computed hit rates, and the shipped trace reproducing REFERENCE.md's table.
#include "apps/analyze/hitrate.hpp"
#include "apps/replay/trace.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

namespace crescent::analyze {
namespace {

using replay::trace_record;

trace_record request(uint32_t input_tokens, std::vector<uint64_t> hash_ids) {
  trace_record r;
  r.input_tokens = input_tokens;
  r.hash_ids = std::move(hash_ids);
  return r;
}

// The one row of a single capacity.
hitrate_row row_of(const std::vector<trace_record>& trace, uint64_t capacity_tokens,
                   uint32_t block_tokens = 512) {
  const uint64_t capacities[] = {capacity_tokens};
  auto rows = prefix_hit_rates(trace, capacities, block_tokens);
  EXPECT_TRUE(rows) << describe(rows.error());
  if (!rows || rows->size() != 1)
    return {};
  return rows->front();
}

TEST(hitrate, a_repeated_prompt_reuses_all_of_it) {
  const std::vector<trace_record> trace = {request(1024, {1, 2}), request(1024, {1, 2})};
  auto row = row_of(trace, unbounded_capacity_tokens);
  EXPECT_EQ(row.capacity_tokens, unbounded_capacity_tokens);
  EXPECT_EQ(row.reused_tokens, 1024u);
  EXPECT_EQ(row.prompt_tokens, 2048u);
  EXPECT_DOUBLE_EQ(row.hit_rate(), 0.5);
}

// Keys are chained: an equal id counts only after an equal prefix.
TEST(hitrate, a_shared_prefix_is_reused_up_to_the_first_difference) {
  const std::vector<trace_record> trace = {
      request(1536, {1, 2, 3}), // nothing cached yet
      request(1536, {1, 2, 9}), // 1, 2: 1024
      request(1536, {7, 2, 3}), // 2 and 3 follow another first block: 0
      request(1536, {1, 9, 3}), // 1: 512 (9 was cached after 1, 2, not after 1)
  };
  auto row = row_of(trace, unbounded_capacity_tokens);
  EXPECT_EQ(row.reused_tokens, 1536u);
  EXPECT_EQ(row.prompt_tokens, 4u * 1536);
}

// Two blocks of room. A is refreshed by its hit, so C evicts B (FIFO would evict A, and then
// the second A would miss and the second B hit: 512 tokens reused instead of 1024).
TEST(hitrate, eviction_drops_the_least_recently_used_block) {
  const std::vector<trace_record> trace = {
      request(512, {1}), // A: miss        cache A
      request(512, {2}), // B: miss        cache B A
      request(512, {1}), // A: hit         cache A B
      request(512, {3}), // C: miss        cache C A (B evicted)
      request(512, {1}), // A: hit         cache A C
      request(512, {2}), // B: miss        cache B A (C evicted)
  };
  auto row = row_of(trace, 1024);
  EXPECT_EQ(row.reused_tokens, 1024u);
  EXPECT_EQ(row.prompt_tokens, 6u * 512);
  // floor(1535 / 512) = 2 blocks, the same cache.
  EXPECT_EQ(row_of(trace, 1535).reused_tokens, 1024u);
}

TEST(hitrate, a_cache_smaller_than_a_block_keeps_nothing) {
  const std::vector<trace_record> trace = {request(512, {1}), request(512, {1})};
  EXPECT_EQ(row_of(trace, 511).reused_tokens, 0u) << "0 blocks is not unbounded";
  EXPECT_EQ(row_of(trace, 512).reused_tokens, 512u);
}

// The prompt's own blocks evict each other in order: what is left is its tail, which no later
// request can reach without the head.
TEST(hitrate, a_prompt_longer_than_the_cache_leaves_no_reusable_prefix) {
  const std::vector<trace_record> trace = {request(1024, {1, 2}), request(1024, {1, 2})};
  EXPECT_EQ(row_of(trace, 512).reused_tokens, 0u);
  EXPECT_EQ(row_of(trace, 1024).reused_tokens, 1024u);
}

// A cached partial last block counts the tokens of the request that reuses it, at most.
TEST(hitrate, a_partial_last_block_counts_only_the_prompt_tokens) {
  const std::vector<trace_record> trace = {
      request(700, {1, 2}),  // miss
      request(700, {1, 2}),  // 2 blocks: min(1024, 700) = 700
      request(1000, {1, 2}), // 2 blocks: min(1024, 1000) = 1000
  };
  auto row = row_of(trace, unbounded_capacity_tokens);
  EXPECT_EQ(row.reused_tokens, 1700u);
  EXPECT_EQ(row.prompt_tokens, 2400u);
}

// block_tokens 256: trace block 0 is two cache blocks; the partial block 1 of a 700-token
// prompt (188 tokens) is one, of a 1000-token prompt (488 tokens) two, so the 1000-token prompt
// reuses only 3 x 256 of the 700-token one, and the 700-token prompt all of its 3 from it.
TEST(hitrate, smaller_blocks_split_trace_blocks_and_partial_last_blocks) {
  const std::vector<trace_record> trace = {
      request(700, {1, 2}),  // miss: 3 blocks
      request(1000, {1, 2}), // 3 blocks: 768
      request(700, {1, 2}),  // 3 blocks: min(768, 700) = 700
  };
  auto row = row_of(trace, unbounded_capacity_tokens, 256);
  EXPECT_EQ(row.reused_tokens, 768u + 700);
  EXPECT_EQ(row.prompt_tokens, 2400u);
  // At 512: 1000 + 700, every block shared.
  EXPECT_EQ(row_of(trace, unbounded_capacity_tokens).reused_tokens, 1700u);
}

// 768 tokens hold 3 blocks of 256 (the whole 700-token prompt) but 1 of 512 (not it).
TEST(hitrate, smaller_blocks_count_capacity_in_their_own_size) {
  const std::vector<trace_record> trace = {request(700, {1, 2}), request(700, {1, 2})};
  EXPECT_EQ(row_of(trace, 768, 256).reused_tokens, 700u);
  EXPECT_EQ(row_of(trace, 768, 512).reused_tokens, 0u);
}

TEST(hitrate, block_tokens_must_divide_512) {
  const std::vector<trace_record> trace = {request(512, {1})};
  const uint64_t capacities[] = {unbounded_capacity_tokens};
  for (uint32_t bad : {0u, 3u, 300u, 1024u}) {
    auto rows = prefix_hit_rates(trace, capacities, bad);
    ASSERT_FALSE(rows) << bad;
    EXPECT_TRUE(is(rows.error(), errc::invalid_argument));
    EXPECT_NE(describe(rows.error()).find("must divide the trace's 512-token blocks"),
              std::string::npos)
        << describe(rows.error());
  }
  for (uint32_t good : {1u, 64u, 256u, 512u})
    EXPECT_TRUE(prefix_hit_rates(trace, capacities, good)) << good;
}

TEST(hitrate, rows_follow_the_capacities_given) {
  const std::vector<trace_record> trace = {request(512, {1}), request(512, {2}), request(512, {1})};
  const uint64_t capacities[] = {512, unbounded_capacity_tokens, 0, 1024};
  auto rows = prefix_hit_rates(trace, capacities, 512);
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 4u);
  const uint64_t reused[] = {0, 512, 512, 512};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ((*rows)[i].capacity_tokens, capacities[i]);
    EXPECT_EQ((*rows)[i].reused_tokens, reused[i]) << i;
    EXPECT_EQ((*rows)[i].prompt_tokens, 1536u);
  }
}

TEST(hitrate, an_empty_trace_has_rate_zero) {
  auto row = row_of({}, unbounded_capacity_tokens);
  EXPECT_EQ(row.prompt_tokens, 0u);
  EXPECT_EQ(row.hit_rate(), 0.0);
}

TEST(hitrate, capacity_words) {
  EXPECT_EQ(parse_capacity_tokens("unbounded"), unbounded_capacity_tokens);
  EXPECT_EQ(parse_capacity_tokens("0"), 0u);
  EXPECT_EQ(parse_capacity_tokens("10000"), 10000u);
  EXPECT_EQ(parse_capacity_tokens("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  for (const char* bad :
       {"", "-1", "+5", " 5", "5 ", "1e6", "10k", "Unbounded", "18446744073709551616"})
    EXPECT_FALSE(parse_capacity_tokens(bad)) << '"' << bad << '"';
}

std::string four_decimals(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", x);
  return buf;
}

// REFERENCE.md, "Block-level prefix hit rate of one global LRU cache over the synthetic trace".
TEST(hitrate, the_shipped_trace_reproduces_the_reference_table) {
  auto trace = replay::read_trace(CRESCENT_DATA_DIR "/synthetic_trace.jsonl", 0);
  ASSERT_TRUE(trace) << describe(trace.error());
  ASSERT_EQ(trace->size(), 3993u);
  const uint64_t capacities[] = {
      unbounded_capacity_tokens, 10'000'000, 3'000'000, 1'000'000, 100'000, 10'000};
  const char* expected[] = {"0.6512", "0.5768", "0.3151", "0.1421", "0.0116", "0.0003"};
  const auto started = std::chrono::steady_clock::now();
  auto rows = prefix_hit_rates(*trace, capacities, 512);
  const auto took = std::chrono::steady_clock::now() - started;
  ASSERT_TRUE(rows) << describe(rows.error());
  ASSERT_EQ(rows->size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    EXPECT_EQ(four_decimals((*rows)[i].hit_rate()), expected[i]) << "capacity " << capacities[i];
    EXPECT_EQ((*rows)[i].prompt_tokens, (*rows)[0].prompt_tokens);
  }
  // Mean input 15,325 tokens (Table 2).
  EXPECT_EQ((*rows)[0].prompt_tokens / 3993, 15325u);
  std::printf("six capacities over the trace: %.3f s\n",
              std::chrono::duration<double>(took).count());
}

} // namespace
} // namespace crescent::analyze
