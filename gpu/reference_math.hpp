// Scalar math of the reference engine, built only from IEEE-754 basic operations (+ - * /,
// sqrt, exact scaling by powers of two). libm's exp/sin/cos pick CPU-specific code paths at
// run time (FMA or not) and may differ in the last bit between machines; KV bytes move between
// workers on different machines, so every transcendental here is computed by our own code.
// Accuracy only needs to be good, not correctly rounded; what matters is that the result is a
// pure function of the input on every x86-64 (and any IEEE) machine.
#pragma once

#include "gpu/portable_math.hpp"

#include <bit>
#include <cmath>
#include <cstdint>

namespace crescent::gpu::ref {

/// One step of splitmix64: a fixed, well-mixed stream from any seed.
inline uint64_t splitmix64(uint64_t& state) {
  state += 0x9e3779b97f4a7c15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// e^x in double for |x| < 700 (used for the RoPE frequencies only).
inline double exp_d(double x) {
  constexpr double ln2_hi = 6.93147180369123816490e-01; // fdlibm's split of ln 2
  constexpr double ln2_lo = 1.90821492927058770002e-10;
  const double k = std::floor(x * 1.44269504088896338700 + 0.5);
  const double r = (x - k * ln2_hi) - k * ln2_lo; // |r| <= 0.35
  double p = 1.0;
  for (int i = 16; i >= 1; --i) // Taylor series in Horner form
    p = 1.0 + p * r / i;
  return std::ldexp(p, static_cast<int>(k));
}

/// Natural logarithm in double for finite x > 0.
inline double log_d(double x) {
  constexpr double ln2_hi = 6.93147180369123816490e-01;
  constexpr double ln2_lo = 1.90821492927058770002e-10;
  int e = 0;
  double m = std::frexp(x, &e); // exact: x = m * 2^e, m in [0.5, 1)
  if (m < 0.70710678118654752440) {
    m *= 2.0;
    e -= 1;
  }
  // log m = 2 atanh(s) with s = (m - 1) / (m + 1), |s| <= 0.172.
  const double s = (m - 1.0) / (m + 1.0);
  const double s2 = s * s;
  double sum = 0.0;
  for (int i = 25; i >= 1; i -= 2)
    sum = 1.0 / i + s2 * sum;
  return e * ln2_hi + (e * ln2_lo + 2.0 * s * sum);
}

/// sin and cos of 0 <= x < 2^20 in double.
inline void sincos_d(double x, double& sin_out, double& cos_out) {
  // pi/2 in three pieces of 33 bits: k * piece is exact for k < 2^20.
  constexpr double pio2_1 = 1.57079632673412561417e+00;
  constexpr double pio2_2 = 6.07710050630396597660e-11;
  constexpr double pio2_3 = 2.02226624871116645580e-21;
  const double k = std::floor(x * 6.36619772367581382433e-01 + 0.5);
  const double r = ((x - k * pio2_1) - k * pio2_2) - k * pio2_3; // |r| <= pi/4 (+ a hair)
  const double r2 = r * r;
  double s = 1.0;
  double c = 1.0;
  for (int i = 20; i >= 2; i -= 2) { // Taylor series of sin(r)/r and cos(r) in Horner form
    s = 1.0 - s * r2 / ((i + 1.0) * i);
    c = 1.0 - c * r2 / (i * (i - 1.0));
  }
  s *= r;
  switch (static_cast<uint64_t>(k) & 3) {
  case 0:
    sin_out = s, cos_out = c;
    break;
  case 1:
    sin_out = c, cos_out = -s;
    break;
  case 2:
    sin_out = -s, cos_out = -c;
    break;
  default:
    sin_out = -c, cos_out = s;
    break;
  }
}

// exp_f (e^x in float, branch-free) is crescent::gpu::exp_f (gpu/portable_math.hpp), which the
// device engine's kernels compile too.

} // namespace crescent::gpu::ref
