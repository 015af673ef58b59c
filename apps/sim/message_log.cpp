#include "apps/sim/message_log.hpp"

#include "messages/errors.hpp"

#include <cerrno>
#include <cinttypes>
#include <cstring>

namespace crescent::sim {

caf::expected<std::unique_ptr<message_log>> message_log::open(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr)
    return make_error(errc::io_error, "cannot write " + path + ": " + std::strerror(errno));
  std::fputs("# crescent messages 1: time_ns sender receiver type bytes\n", f);
  return std::unique_ptr<message_log>{new message_log(f, path)};
}

message_log::~message_log() {
  if (file_ != nullptr)
    std::fclose(file_);
}

void message_log::write(const delivered_message& m, const sim_system& sim) {
  if (failed_)
    return;
  const auto& labels = sim.labels();
  const auto& types = sim.types();
  // fprintf, not fmt::print, which throws when the disk is full.
  if (std::fprintf(file_, "%" PRId64 "\t%s\t%s\t%s\t%" PRIu64 "\n", m.time_ns,
                   labels[m.sender].c_str(), labels[m.receiver].c_str(), types[m.type].c_str(),
                   m.bytes) < 0)
    failed_ = true;
}

caf::error message_log::close() {
  const bool flushed = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (failed_ || !flushed || !closed)
    return make_error(errc::io_error, "writing the message log " + path_ + " failed");
  return caf::none;
}

} // namespace crescent::sim
