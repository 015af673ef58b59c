#include "transport/tcp/stream_reader.hpp"

#include "transport/tcp/socket_io.hpp"

#include <sys/socket.h>

#include <cstring>

namespace crescent::transport::tcp {

size_t stream_reader::take(std::byte* out, size_t length) {
  const size_t n = std::min(length, buffered());
  std::memcpy(out, buffer_.get() + begin_, n);
  begin_ += n;
  if (begin_ == end_)
    begin_ = end_ = 0;
  return n;
}

caf::error stream_reader::read(void* out, size_t length, bool idle_ok) {
  auto* p = static_cast<std::byte*>(out);
  size_t got = take(p, length);
  while (got < length) {
    // The buffer is empty here. A large rest skips it: one copy, by the kernel.
    if (length - got >= buffer_bytes / 2)
      return read_full(fd_, p + got, length - got, idle_ok && got == 0);
    const ssize_t n = recv(fd_, buffer_.get(), buffer_bytes, 0);
    if (n > 0) {
      end_ = static_cast<size_t>(n);
      got += take(p + got, length - got);
    } else if (auto err = receive_failure(n, idle_ok && got == 0)) {
      return err;
    }
  }
  return caf::none;
}

bool stream_reader::has(size_t length) {
  if (buffered() >= length)
    return true;
  if (begin_ > 0) { // keep what is buffered, at the front
    std::memmove(buffer_.get(), buffer_.get() + begin_, buffered());
    end_ -= begin_;
    begin_ = 0;
  }
  const ssize_t n = recv(fd_, buffer_.get() + end_, buffer_bytes - end_, MSG_DONTWAIT);
  if (n > 0)
    end_ += static_cast<size_t>(n);
  return buffered() >= length;
}

} // namespace crescent::transport::tcp
