#include "apps/bench/transfer_baselines.hpp"

#include "messages/errors.hpp"
#include "transport/device_memory.hpp"
#include "transport/tcp/socket_io.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

namespace crescent::bench {

namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t) {
  return std::chrono::duration<double>(clock::now() - t).count();
}

} // namespace

double memcpy_gbps(std::byte* src, std::byte* dst, uint64_t span, uint64_t block, double seconds) {
  uint64_t bytes = 0, at = 0;
  const auto start = clock::now();
  while (seconds_since(start) < seconds) {
    for (int i = 0; i < 16; ++i) {
      if (at + block > span)
        at = 0;
      std::memcpy(dst + at, src + at, block);
      at += block;
      bytes += block;
    }
  }
  return static_cast<double>(bytes) / seconds_since(start) / 1e9;
}

caf::expected<double> tcp_stream_gbps(uint16_t port, const std::byte* buf, uint64_t span,
                                      double seconds) {
  auto fd = transport::tcp::connect_to("127.0.0.1", port, std::chrono::seconds(2));
  if (!fd)
    return std::move(fd.error());
  constexpr uint64_t chunk = 1u << 20;
  uint64_t bytes = 0;
  uint64_t at = 0;
  const auto start = clock::now();
  while (seconds_since(start) < seconds) {
    if (at + chunk > span)
      at = 0;
    ssize_t n = send(*fd, buf + at, chunk, MSG_NOSIGNAL);
    if (n <= 0) {
      close(*fd);
      return make_error(errc::io_error, "the sink closed the stream");
    }
    bytes += static_cast<uint64_t>(n);
    at += static_cast<uint64_t>(n);
  }
  const double gbps = static_cast<double>(bytes) / seconds_since(start) / 1e9;
  close(*fd);
  return gbps;
}

caf::expected<double> cuda_memcpy_gbps(const std::byte* src, uint64_t src_span, std::byte* dst,
                                       uint64_t dst_span, uint64_t block, int device,
                                       double seconds) {
  uint64_t bytes = 0, src_at = 0, dst_at = 0;
  const auto start = clock::now();
  while (seconds_since(start) < seconds) {
    if (src_at + block > src_span)
      src_at = 0;
    if (dst_at + block > dst_span)
      dst_at = 0;
    if (auto err = transport::copy_and_wait(dst + dst_at, src + src_at, block, device))
      return err;
    src_at += block;
    dst_at += block;
    bytes += block;
  }
  return static_cast<double>(bytes) / seconds_since(start) / 1e9;
}

} // namespace crescent::bench
