// Vectorization helpers shared by the reference engine's kernels (private to gpu/).
//
// None of this may change a result: the kernels' KV bytes must be identical on every machine
// and build. Wider vectors only change how many independent outputs are computed at once,
// never the operations of one output, and -ffp-contract=off keeps fused multiply-adds out.
#pragma once

#include <cstring>

// The hot loops are also compiled for AVX2 and picked at load time on CPUs that have it.
// Helpers they call are forced inline so that the AVX2 copy really uses AVX2 throughout.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) &&                             \
    !defined(CRESCENT_NO_VECTOR_CLONES)
#define CRESCENT_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define CRESCENT_INLINE __attribute__((always_inline)) inline
#else
#define CRESCENT_VECTOR_CLONES
#define CRESCENT_INLINE inline
#endif

namespace crescent::gpu::ref {

// Eight floats as one value (a GCC vector extension, with element-wise IEEE operations): for
// accumulators that must stay in registers across a loop, which g++ does not arrange on its
// own for the scalar form of those loop nests. Passed by reference only: a by-value vector
// argument would depend on the target's ABI.
typedef float float8 __attribute__((vector_size(32)));

CRESCENT_INLINE void load8(float8& v, const float* p) {
  std::memcpy(&v, p, sizeof v);
}

CRESCENT_INLINE void store8(float* p, const float8& v) {
  std::memcpy(p, &v, sizeof v);
}

} // namespace crescent::gpu::ref
