#include "actors/conductor/policy.hpp"

#include <array>
#include <utility>

namespace crescent {

namespace {

struct entry {
  policy_kind kind;
  const char* name;
  policies::prefill_fn fn;
};

constexpr std::array<entry, 6> registry = {{
    {policy_kind::random, "random", &policies::random},
    {policy_kind::round_robin, "round_robin", &policies::round_robin},
    {policy_kind::least_loaded, "least_loaded", &policies::least_loaded},
    {policy_kind::local_cache_aware, "local_cache_aware", &policies::local_cache_aware},
    {policy_kind::global_cache_aware, "global_cache_aware", &policies::global_cache_aware},
    {policy_kind::block_cost, "block_cost", &policies::block_cost},
}};

constexpr std::array<std::pair<admission_mode, const char*>, 3> admissions = {{
    {admission_mode::none, "none"},
    {admission_mode::current_load, "current_load"},
    {admission_mode::predicted_load, "predicted_load"},
}};

} // namespace

bool parse(std::string_view text, policy_kind& out) {
  for (const auto& e : registry)
    if (text == e.name) {
      out = e.kind;
      return true;
    }
  return false;
}

bool parse(std::string_view text, admission_mode& out) {
  for (const auto& [mode, name] : admissions)
    if (text == name) {
      out = mode;
      return true;
    }
  return false;
}

const char* to_string(policy_kind p) {
  for (const auto& e : registry)
    if (e.kind == p)
      return e.name;
  return "global_cache_aware";
}

const char* to_string(admission_mode m) {
  for (const auto& [mode, name] : admissions)
    if (mode == m)
      return name;
  return "predicted_load";
}

scheduling_policy::scheduling_policy(policy_kind kind, uint64_t seed) : kind_(kind) {
  state_.rng.seed(seed);
  prefill_ = &policies::global_cache_aware;
  for (const auto& e : registry)
    if (e.kind == kind)
      prefill_ = e.fn;
}

decision scheduling_policy::place(const schedule_view& v, const request_view& r) {
  const auto match = v.index->match(r.keys, v.ssd_index);
  return complete(v, r, prefill_(v, r, match, state_));
}

} // namespace crescent
