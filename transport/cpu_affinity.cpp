#include "transport/cpu_affinity.hpp"

#include "messages/errors.hpp"

#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace crescent::transport {

caf::expected<std::vector<uint32_t>> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0)
    return make_error(errc::io_error, std::string{"sched_getaffinity: "} + std::strerror(errno));
  std::vector<uint32_t> out;
  for (uint32_t cpu = 0; cpu < cpu_count_max; ++cpu)
    if (CPU_ISSET(cpu, &set))
      out.push_back(cpu);
  return out;
}

} // namespace crescent::transport
