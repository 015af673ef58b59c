// The statistic every benchmark row reports: the median of its trials (upper median for an
// even count).
#pragma once

#include <algorithm>
#include <cassert>
#include <vector>

namespace crescent::bench {

inline double median(std::vector<double> v) {
  assert(!v.empty());
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

} // namespace crescent::bench
