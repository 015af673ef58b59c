// Non-negative least squares of relative errors, as profiles fit timing models.
#include "gpu/least_squares.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

namespace crescent::gpu {
namespace {

TEST(least_squares, recovers_exact_coefficients) {
  // y = 5 + 3 n + 0.5 k over a small grid: no noise, so the fit is exact.
  std::vector<std::vector<double>> x;
  std::vector<double> y;
  for (double n : {1.0, 4.0, 16.0, 64.0})
    for (double k : {0.0, 10.0, 1000.0}) {
      x.push_back({1.0, n, k});
      y.push_back(5 + 3 * n + 0.5 * k);
    }
  auto f = fit_nonnegative(x, y);
  ASSERT_TRUE(f) << describe(f.error());
  ASSERT_EQ(f->coefficients.size(), 3u);
  EXPECT_NEAR(f->coefficients[0], 5, 1e-6);
  EXPECT_NEAR(f->coefficients[1], 3, 1e-6);
  EXPECT_NEAR(f->coefficients[2], 0.5, 1e-9);
  EXPECT_LT(f->rms_relative_error, 1e-9);
}

TEST(least_squares, keeps_every_term_non_negative) {
  // A line with a negative intercept: the unconstrained fit would take it; this one may not.
  std::vector<std::vector<double>> x{{1, 1}, {1, 2}, {1, 3}, {1, 4}};
  std::vector<double> y{1, 3, 5, 7}; // 2 n - 1
  auto f = fit_nonnegative(x, y);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->coefficients[0], 0.0);
  EXPECT_GT(f->coefficients[1], 0.0);
  EXPECT_GT(f->rms_relative_error, 0.0);
}

TEST(least_squares, refuses_bad_input) {
  std::vector<std::vector<double>> x{{1, 2}};
  std::vector<double> y{3};
  EXPECT_FALSE(fit_nonnegative(x, y)) << "fewer rows than terms";
  EXPECT_FALSE(fit_nonnegative({}, {}));
  std::vector<std::vector<double>> ragged{{1, 2}, {1}};
  std::vector<double> two{1, 2};
  EXPECT_FALSE(fit_nonnegative(ragged, two));
  std::vector<std::vector<double>> ok{{1}, {2}};
  std::vector<double> bad{1, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_FALSE(fit_nonnegative(ok, bad));
  std::vector<double> zero{1, 0};
  EXPECT_FALSE(fit_nonnegative(ok, zero)) << "times are positive";
}

} // namespace
} // namespace crescent::gpu
