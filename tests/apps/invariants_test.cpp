// The invariants checked after every crescent up run and chaos seed (apps/up/invariants.hpp),
// on hand-built outcomes.
#include "apps/up/invariants.hpp"

#include <gtest/gtest.h>

namespace crescent::up {
namespace {

replay::synthetic_request request(uint64_t id) {
  replay::synthetic_request q;
  q.id = id;
  q.tokens = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18};
  for (auto& t : q.tokens)
    t = (t * 7 + static_cast<uint32_t>(id)) % 256;
  q.max_new_tokens = 4;
  return q;
}

replay::request_result completed(const cluster_config& cfg, const replay::synthetic_request& q) {
  replay::request_result x;
  x.id = q.id;
  x.status = replay::outcome_status::completed;
  x.tokens = reference_tokens(cfg.model, q.tokens, q.max_new_tokens);
  return x;
}

TEST(invariants, every_request_ends_once_and_completed_ones_decode_the_reference_tokens) {
  cluster_config cfg;
  std::vector<replay::synthetic_request> reqs{request(0), request(1), request(2), request(3)};
  std::vector<replay::request_result> results{completed(cfg, reqs[0]), completed(cfg, reqs[1])};
  ASSERT_EQ(results[0].tokens.size(), 4u);
  auto r = check_invariants(cfg, reqs, results);
  EXPECT_FALSE(r.held()) << "requests 2 and 3 never ended";
  EXPECT_EQ(r.ended, 2u);
  EXPECT_EQ(r.tokens_checked, 2u);
  EXPECT_EQ(r.tokens_wrong, 0u);

  replay::request_result failed;
  failed.id = 2;
  failed.status = replay::outcome_status::failed; // and no reason
  results.push_back(failed);
  auto wrong = completed(cfg, reqs[3]);
  wrong.tokens[1] ^= 1;
  results.push_back(wrong);
  r = check_invariants(cfg, reqs, results);
  EXPECT_EQ(r.ended, 4u);
  EXPECT_EQ(r.tokens_wrong, 1u);
  EXPECT_EQ(r.violations.size(), 2u) << format_invariants(r);

  // Under a kv_codec other tokens are no error, and the report says why they were not compared;
  // the other invariants still hold or not.
  cfg.codec.kind = storage::codec::codec_kind::int8;
  r = check_invariants(cfg, reqs, results);
  EXPECT_EQ(r.tokens_checked, 0u);
  EXPECT_EQ(r.violations.size(), 1u) << "the failure without a reason";
  EXPECT_NE(format_invariants(r).find("kv_codec int8"), std::string::npos) << format_invariants(r);
}

} // namespace
} // namespace crescent::up
