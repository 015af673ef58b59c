#include "transport/sealed_file.hpp"

#include "messages/errors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace crescent::transport {

caf::expected<int> sealed_memfd(const char* name, uint64_t bytes) {
  int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return make_error(errc::no_space, std::string{"memfd_create: "} + std::strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    auto err = make_error(errc::no_space, "sizing and sealing a memfd of " + std::to_string(bytes) +
                                              " bytes: " + std::strerror(errno));
    close(fd);
    return err;
  }
  return fd;
}

caf::expected<peer_file> open_peer_file(int32_t pid, int32_t n, int flags) {
  peer_file f;
  f.path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(n);
  f.fd = ::open(f.path.c_str(), flags | O_CLOEXEC);
  if (f.fd < 0)
    return make_error(errc::unavailable, "cannot open " + f.path + ": " + std::strerror(errno));
  const int seals = fcntl(f.fd, F_GET_SEALS);
  struct stat st {};
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0 || fstat(f.fd, &st) != 0) {
    close(f.fd);
    return make_error(errc::unavailable, f.path + " is not sealed against shrinking");
  }
  f.bytes = static_cast<uint64_t>(st.st_size);
  f.inode = static_cast<uint64_t>(st.st_ino);
  return f;
}

} // namespace crescent::transport
