#include "storage/ssd_io.hpp"

#include "messages/errors.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#ifdef CRESCENT_HAVE_URING
#include <liburing.h>
#endif

namespace crescent::storage {

namespace {

caf::error io_failure(const char* what, int err) {
  const errc code =
      (err == ENOSPC || err == EDQUOT || err == EFBIG) ? errc::no_space : errc::io_error;
  return make_error(code, std::string{what} + ": " + std::strerror(err));
}

class pread_io final : public file_io {
 public:
  explicit pread_io(int fd) : fd_(fd) {}

  caf::error write_at(uint64_t offset, std::span<const std::byte> bytes) override {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n =
          pwrite(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return io_failure("SSD write", n < 0 ? errno : EIO);
      done += static_cast<size_t>(n);
    }
    return caf::none;
  }

  caf::error read_at(uint64_t offset, std::span<std::byte> bytes) override {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n =
          pread(fd_, bytes.data() + done, bytes.size() - done, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0)
        return io_failure("SSD read", n < 0 ? errno : EIO); // 0: the file ends early
      done += static_cast<size_t>(n);
    }
    return caf::none;
  }

  const char* name() const override { return "pread/pwrite"; }

 private:
  int fd_;
};

#ifdef CRESCENT_HAVE_URING

class uring_io final : public file_io {
 public:
  explicit uring_io(int fd) : fd_(fd) {}
  ~uring_io() override {
    if (ready_)
      io_uring_queue_exit(&ring_);
  }

  bool init() {
    ready_ = io_uring_queue_init(8, &ring_, 0) == 0;
    return ready_;
  }

  caf::error write_at(uint64_t offset, std::span<const std::byte> bytes) override {
    return transfer(true, offset, const_cast<std::byte*>(bytes.data()), bytes.size());
  }

  caf::error read_at(uint64_t offset, std::span<std::byte> bytes) override {
    return transfer(false, offset, bytes.data(), bytes.size());
  }

  const char* name() const override { return "io_uring"; }

 private:
  caf::error transfer(bool write, uint64_t offset, std::byte* p, size_t length) {
    size_t done = 0;
    while (done < length) {
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr)
        return make_error(errc::io_error, "io_uring submission queue full");
      const auto n = static_cast<unsigned>(std::min<size_t>(length - done, 1u << 30));
      if (write)
        io_uring_prep_write(sqe, fd_, p + done, n, offset + done);
      else
        io_uring_prep_read(sqe, fd_, p + done, n, offset + done);
      if (int rc = io_uring_submit_and_wait(&ring_, 1); rc < 0)
        return io_failure("io_uring submit", -rc);
      io_uring_cqe* cqe = nullptr;
      if (int rc = io_uring_wait_cqe(&ring_, &cqe); rc < 0)
        return io_failure("io_uring wait", -rc);
      const int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (res == -EINTR || res == -EAGAIN)
        continue;
      if (res <= 0)
        return io_failure(write ? "SSD write" : "SSD read", res < 0 ? -res : EIO);
      done += static_cast<size_t>(res);
    }
    return caf::none;
  }

  int fd_;
  io_uring ring_{};
  bool ready_ = false;
};

#endif

} // namespace

std::unique_ptr<file_io> file_io::make(int fd, bool prefer_uring) {
#ifdef CRESCENT_HAVE_URING
  if (prefer_uring) {
    auto u = std::make_unique<uring_io>(fd);
    if (u->init())
      return u;
  }
#else
  (void)prefer_uring;
#endif
  return std::make_unique<pread_io>(fd);
}

} // namespace crescent::storage
