// Buffered reading of one TCP stream, for a protocol of small headers and large payloads:
// headers (and small payloads) that arrive together are taken from one receive instead of one
// receive each, while the rest of a large payload goes from the socket straight into its
// destination. What is buffered past a message is the start of the next one.
#pragma once

#include <caf/error.hpp>

#include <cstddef>
#include <memory>

namespace crescent::transport::tcp {

class stream_reader {
 public:
  static constexpr size_t buffer_bytes = 16u << 10;

  explicit stream_reader(int fd) : fd_(fd) {}

  /// Exactly `length` bytes into `out`. With `idle_ok`, a receive timeout before the first byte
  /// is errc::timeout (an idle connection); after it, an io_error (a stalled peer).
  caf::error read(void* out, size_t length, bool idle_ok = false);

  /// Whether `length` bytes are buffered, after taking in what the socket holds now (without
  /// waiting). False also when the socket failed: the next read() says how.
  bool has(size_t length);

  /// The next `length` bytes, still unread, if has(length); else null. Valid until the next
  /// call of any member.
  const std::byte* peek(size_t length) { return has(length) ? buffer_.get() + begin_ : nullptr; }

 private:
  size_t buffered() const { return end_ - begin_; }
  size_t take(std::byte* out, size_t length);

  int fd_;
  std::unique_ptr<std::byte[]> buffer_{new std::byte[buffer_bytes]};
  size_t begin_ = 0;
  size_t end_ = 0;
};

} // namespace crescent::transport::tcp
