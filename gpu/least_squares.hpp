// Least squares for the timing models that profiles and predictors fit to measurements: minimize
// the relative errors, sum_i ((sum_j c_j x_ij - y_i) / y_i)^2, over the coefficients c, with
// every c_j >= 0 (a time model whose term has a negative cost would predict negative times past
// the measured range; relative, since times span decades).
#pragma once

#include <caf/expected.hpp>

#include <cstddef>
#include <span>
#include <vector>

namespace crescent::gpu {

struct fit_result {
  std::vector<double> coefficients;
  double rms_relative_error = 0; // sqrt(mean((predicted - y)^2 / y^2)), over points with y > 0
};

/// Rows of `features` (each of the same length, at most 8 terms) and their measured `values`.
/// Exact for so few terms: the best of every subset of terms whose unconstrained solution is
/// non-negative (the non-negative optimum is one of them), by normal equations in double
/// precision. Errors: no rows, rows of different lengths, more terms than rows, values that are
/// not finite and positive, features that are not finite.
caf::expected<fit_result> fit_nonnegative(std::span<const std::vector<double>> features,
                                          std::span<const double> values);

} // namespace crescent::gpu
