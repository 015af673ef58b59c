#include "actors/common/remote_connect.hpp"

#include <caf/actor_system_config.hpp>
#include <caf/sec.hpp>
#include <caf/settings.hpp>

namespace crescent {

std::chrono::milliseconds connection_silence_limit(caf::actor_system& sys) {
  const auto& cfg = sys.config();
  const auto heartbeat = caf::get_or(cfg, "middleman.heartbeat-interval", caf::timespan{0});
  if (heartbeat.count() <= 0)
    return std::chrono::milliseconds{0};
  const auto limit = caf::get_or(cfg, "middleman.connection-timeout", caf::timespan{0});
  return std::chrono::duration_cast<std::chrono::milliseconds>(limit);
}

bool handshake_again(caf::actor_system& sys, const caf::error& err,
                     std::chrono::steady_clock::time_point start, uint32_t handshakes) {
  const bool cut_short =
      err == caf::sec::connection_timeout || err == caf::sec::disconnect_during_handshake;
  if (!cut_short || handshakes >= remote_handshakes_max)
    return false;
  // Without heartbeats there is no limit of the system's own: a few tries, then the error.
  const auto limit = connection_silence_limit(sys);
  if (limit.count() > 0 && std::chrono::steady_clock::now() - start >= limit)
    return false;
  if (limit.count() == 0 && handshakes >= 3)
    return false;
  return true;
}

} // namespace crescent
