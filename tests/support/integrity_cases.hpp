// The sizes and offsets every path's random-data integrity test covers (issue 3: 1 byte to
// 64 MiB at unaligned offsets), and a region that holds the largest at any of them.
#pragma once

#include <cstdint>

namespace crescent::transport::test {

inline constexpr uint64_t integrity_sizes[] = {
    1, 7, 4096, 65535, 65536, 65537, (1u << 20) + 3, (8u << 20) + 5, 64u << 20};
inline constexpr uint64_t integrity_offsets[] = {3, 4097, 11};
inline constexpr uint64_t integrity_region_bytes = (64ull << 20) + (64u << 10);

} // namespace crescent::transport::test
