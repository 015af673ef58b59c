// The rows of `crescent bench transfer`: the grid of the issue, --quick, and the row filters.
#include "apps/bench/transfer_rows.hpp"

#include <gtest/gtest.h>

namespace crescent::bench {
namespace {

using transport::op_kind;

TEST(bench_cases, the_default_grid_has_every_row_of_the_issue_in_order) {
  auto rows = transfer_cases({});
  ASSERT_EQ(rows.size(), 2u * 3 * 2 * 2);
  EXPECT_EQ(rows.front().kind, op_kind::write);
  EXPECT_EQ(rows.front().block, 64u << 10);
  EXPECT_EQ(rows.front().batch, 16u);
  EXPECT_EQ(rows.front().threads, 1u);
  EXPECT_EQ(rows.back().kind, op_kind::read);
  EXPECT_EQ(rows.back().block, 4u << 20);
  EXPECT_EQ(rows.back().batch, 128u);
  EXPECT_EQ(rows.back().threads, 2u);
}

TEST(bench_cases, quick_keeps_one_batch_size_and_one_thread) {
  bench_transfer_options o;
  o.quick = true;
  auto rows = transfer_cases(o);
  ASSERT_EQ(rows.size(), 2u * 3);
  for (const auto& r : rows) {
    EXPECT_EQ(r.batch, 16u);
    EXPECT_EQ(r.threads, 1u);
  }
}

TEST(bench_cases, filters_pick_rows_and_override_quick_in_their_dimension) {
  bench_transfer_options o;
  o.quick = true;
  o.op = "read";
  o.blocks_kib = {64, 4096};
  o.threads = {2};
  auto rows = transfer_cases(o);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].kind, op_kind::read);
  EXPECT_EQ(rows[0].block, 64u << 10);
  EXPECT_EQ(rows[1].block, 4u << 20);
  for (const auto& r : rows) {
    EXPECT_EQ(r.batch, 16u);  // from --quick
    EXPECT_EQ(r.threads, 2u); // from the filter
  }
}

} // namespace
} // namespace crescent::bench
