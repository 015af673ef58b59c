#include "apps/analyze/analyze_command.hpp"

#include "apps/analyze/hitrate.hpp"
#include "apps/replay/trace.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>

namespace crescent::cli {

namespace {

int fail(const std::string& what) {
  fmt::print(stderr, "crescent analyze hitrate: {}\n", what);
  return 2;
}

std::string capacity_word(uint64_t capacity_tokens) {
  return capacity_tokens == analyze::unbounded_capacity_tokens ? "unbounded"
                                                               : std::to_string(capacity_tokens);
}

void print_table(const hitrate_options& opt, size_t requests,
                 const std::vector<analyze::hitrate_row>& rows) {
  fmt::print("crescent analyze hitrate: {} requests from {}, one global LRU cache of {}-token "
             "blocks\n",
             requests, opt.trace_path, opt.block_tokens);
  fmt::print("{:>17}  {:>8}  {:>14}  {:>14}\n", "capacity (tokens)", "hit rate", "reused tokens",
             "prompt tokens");
  for (const auto& r : rows)
    fmt::print("{:>17}  {:>8.4f}  {:>14}  {:>14}\n", capacity_word(r.capacity_tokens), r.hit_rate(),
               r.reused_tokens, r.prompt_tokens);
}

void print_json(const hitrate_options& opt, size_t requests,
                const std::vector<analyze::hitrate_row>& rows) {
  using json = nlohmann::ordered_json; // fields in the order of the table
  json out = {{"trace", opt.trace_path},
              {"requests", requests},
              {"block_tokens", opt.block_tokens},
              {"rows", json::array()}};
  for (const auto& r : rows) {
    json capacity = r.capacity_tokens == analyze::unbounded_capacity_tokens
                        ? json("unbounded")
                        : json(r.capacity_tokens);
    out["rows"].push_back({{"capacity_tokens", std::move(capacity)},
                           {"hit_rate", r.hit_rate()},
                           {"reused_tokens", r.reused_tokens},
                           {"prompt_tokens", r.prompt_tokens}});
  }
  // replace: a path that is not UTF-8 must not make dump() throw.
  fmt::print("{}\n", out.dump(2, ' ', false, json::error_handler_t::replace));
}

} // namespace

int hitrate_command(const hitrate_options& opt) {
  if (auto err = analyze::check_block_tokens(opt.block_tokens))
    return fail(describe(err));
  std::vector<uint64_t> capacities_tokens;
  for (const auto& word : opt.capacities) {
    auto capacity = analyze::parse_capacity_tokens(word);
    if (!capacity)
      return fail("--capacity-tokens " + word + ": expected a non-negative integer or unbounded");
    capacities_tokens.push_back(*capacity);
  }
  if (capacities_tokens.empty())
    return fail("--capacity-tokens: give at least one capacity");
  auto records = replay::read_trace(opt.trace_path, 0);
  if (!records)
    return fail(describe(records.error()));
  auto rows = analyze::prefix_hit_rates(*records, capacities_tokens, opt.block_tokens);
  if (!rows)
    return fail(describe(rows.error()));
  if (opt.json)
    print_json(opt, records->size(), *rows);
  else
    print_table(opt, records->size(), *rows);
  return 0;
}

} // namespace crescent::cli
