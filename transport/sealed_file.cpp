#include "transport/sealed_file.hpp"

#include "messages/errors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
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

bool cannot_shrink(int fd) {
  const int seals = fcntl(fd, F_GET_SEALS);
  return seals >= 0 && (seals & F_SEAL_SHRINK) != 0;
}

} // namespace crescent::transport
