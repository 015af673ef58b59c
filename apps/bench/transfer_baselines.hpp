// The baselines of `crescent bench transfer`, each measured in the same run as the rows it
// scales: what one thread gets from the plain means the engine's paths build on.
#pragma once

#include <caf/expected.hpp>

#include <cstddef>
#include <cstdint>

namespace crescent::bench {

/// Single-thread memcpy of `block` bytes at a time from `src` to `dst`, walking through `span`
/// bytes of each (more than the caches hold), for `seconds`. GB/s.
double memcpy_gbps(std::byte* src, std::byte* dst, uint64_t span, uint64_t block, double seconds);

/// A plain TCP stream of 1 MiB writes to the sink at 127.0.0.1:`port`, sent from `span` bytes of
/// `buf` walked through as the engine's operations walk through theirs (the sink does the same
/// at its end: transfer_peer.cpp). GB/s.
caf::expected<double> tcp_stream_gbps(uint16_t port, const std::byte* buf, uint64_t span,
                                      double seconds);

/// Single-thread cudaMemcpy of `block` bytes at a time from `src` to `dst` (host or GPU memory)
/// with cuda:`device` current, walking through `src_span` and `dst_span` bytes. GB/s.
caf::expected<double> cuda_memcpy_gbps(const std::byte* src, uint64_t src_span, std::byte* dst,
                                       uint64_t dst_span, uint64_t block, int device,
                                       double seconds);

} // namespace crescent::bench
