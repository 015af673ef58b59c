#include "gpu/least_squares.hpp"

#include "messages/errors.hpp"

#include <cmath>
#include <limits>

namespace crescent::gpu {

namespace {

constexpr size_t terms_max = 8;

// Solves the normal equations of the weighted rows restricted to the terms in `mask` (Gaussian
// elimination with partial pivoting); false when they are singular.
bool solve_subset(const std::vector<std::vector<double>>& a, const std::vector<double>& b,
                  unsigned mask, size_t k, std::vector<double>& x) {
  std::vector<size_t> cols;
  for (size_t j = 0; j < k; ++j)
    if ((mask >> j) & 1u)
      cols.push_back(j);
  const size_t m = cols.size();
  std::vector<std::vector<double>> n(m, std::vector<double>(m + 1, 0.0));
  for (size_t r = 0; r < a.size(); ++r)
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < m; ++j)
        n[i][j] += a[r][cols[i]] * a[r][cols[j]];
      n[i][m] += a[r][cols[i]] * b[r];
    }
  for (size_t i = 0; i < m; ++i) {
    size_t pivot = i;
    for (size_t r = i + 1; r < m; ++r)
      if (std::fabs(n[r][i]) > std::fabs(n[pivot][i]))
        pivot = r;
    if (std::fabs(n[pivot][i]) < 1e-300)
      return false;
    std::swap(n[i], n[pivot]);
    for (size_t r = 0; r < m; ++r) {
      if (r == i)
        continue;
      const double f = n[r][i] / n[i][i];
      for (size_t c = i; c <= m; ++c)
        n[r][c] -= f * n[i][c];
    }
  }
  x.assign(k, 0.0);
  for (size_t i = 0; i < m; ++i)
    x[cols[i]] = n[i][m] / n[i][i];
  return true;
}

double residual(const std::vector<std::vector<double>>& a, const std::vector<double>& b,
                const std::vector<double>& x) {
  double sum = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    double p = 0;
    for (size_t j = 0; j < x.size(); ++j)
      p += a[r][j] * x[j];
    sum += (p - b[r]) * (p - b[r]);
  }
  return sum;
}

} // namespace

caf::expected<fit_result> fit_nonnegative(std::span<const std::vector<double>> features,
                                          std::span<const double> values) {
  if (features.empty() || features.size() != values.size())
    return make_error(errc::invalid_argument, "a fit needs one value per row, and rows");
  const size_t k = features[0].size();
  if (k == 0 || k > terms_max || features.size() < k)
    return make_error(errc::invalid_argument, "a fit needs 1 to 8 terms and a row per term");
  // Rows weighted by 1 / y: the fit minimizes relative errors, since times span decades.
  std::vector<std::vector<double>> a;
  std::vector<double> b;
  std::vector<double> scale(k, 0.0);
  for (size_t r = 0; r < features.size(); ++r) {
    if (features[r].size() != k)
      return make_error(errc::invalid_argument, "rows of a fit differ in length");
    const double y = values[r];
    if (!std::isfinite(y) || y <= 0)
      return make_error(errc::invalid_argument, "a fit's values must be finite and positive");
    std::vector<double> row;
    for (double f : features[r]) {
      if (!std::isfinite(f))
        return make_error(errc::invalid_argument, "a fit's features must be finite");
      row.push_back(f / y);
    }
    a.push_back(std::move(row));
    b.push_back(1.0);
  }
  for (const auto& row : a)
    for (size_t j = 0; j < k; ++j)
      scale[j] = std::max(scale[j], std::fabs(row[j]));
  for (auto& row : a)
    for (size_t j = 0; j < k; ++j)
      row[j] = scale[j] > 0 ? row[j] / scale[j] : 0.0;
  // Exact non-negative least squares for few terms: the best subset whose unconstrained solution
  // is non-negative (the NNLS optimum is one of them).
  std::vector<double> best(k, 0.0), x;
  double best_residual = residual(a, b, best);
  for (unsigned mask = 1; mask < (1u << k); ++mask) {
    if (!solve_subset(a, b, mask, k, x))
      continue;
    bool feasible = true;
    for (double c : x)
      feasible = feasible && c >= 0;
    const double res = feasible ? residual(a, b, x) : std::numeric_limits<double>::infinity();
    if (res < best_residual) {
      best_residual = res;
      best = x;
    }
  }
  fit_result out;
  for (size_t j = 0; j < k; ++j)
    out.coefficients.push_back(scale[j] > 0 ? best[j] / scale[j] : 0.0);
  out.rms_relative_error = std::sqrt(best_residual / static_cast<double>(a.size()));
  return out;
}

} // namespace crescent::gpu
