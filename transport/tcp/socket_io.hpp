// Blocking socket helpers of the TCP data plane. Each returns an error describing the failure
// (with errno); a peer that closed the connection is an io_error too.
#pragma once

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <sys/types.h>
#include <sys/uio.h>
#include <vector>

namespace crescent::transport::tcp {

/// Reads exactly `length` bytes. With `idle_ok`, a receive timeout before the first byte is
/// reported as errc::timeout (an idle connection), after it as an io_error (a stalled peer).
caf::error read_full(int fd, void* buffer, size_t length, bool idle_ok = false);

/// What a receive that returned `n` <= 0 (errno set) means: none for "try again" (EINTR), else
/// the error. `idle`: a timeout is errc::timeout (no byte of a message had come), not io_error.
caf::error receive_failure(ssize_t n, bool idle);

/// Writes every byte of the iovecs (modified while writing).
caf::error write_all(int fd, iovec* iov, int count);

/// Writes what the socket takes without waiting, up to `max_bytes` (perhaps nothing); the bytes
/// written.
caf::expected<uint64_t> send_now(int fd, std::span<const iovec> iov, uint64_t max_bytes);

/// A copy of the bytes of `iov` after the first `skip`: what send_now() left.
std::vector<std::byte> bytes_after(std::span<const iovec> iov, uint64_t skip);

/// Connects to host:port within `timeout`; TCP_NODELAY set. Gives up (unavailable) within 50 ms
/// of `abandon` becoming true.
caf::expected<int> connect_to(const std::string& host, uint16_t port,
                              std::chrono::milliseconds timeout,
                              const std::atomic<bool>* abandon = nullptr);

/// A listening socket on host:port (port 0: any); returns the fd and the port.
caf::expected<std::pair<int, uint16_t>> listen_on(const std::string& host, uint16_t port);

/// Bounds how long a blocking receive may wait.
void set_receive_timeout(int fd, std::chrono::milliseconds timeout);

/// Bounds how long a blocking send may wait for the peer to take any byte (write_all then
/// fails with an io_error).
void set_send_timeout(int fd, std::chrono::milliseconds timeout);

} // namespace crescent::transport::tcp
