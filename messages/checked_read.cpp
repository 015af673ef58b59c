#include "messages/checked_read.hpp"

namespace crescent::detail {

caf::error check_envelope(const envelope& env, uint64_t schema_id, const char* schema_name) {
  if (env.empty())
    return make_error(errc::malformed_message,
                      std::string{"empty envelope where "} + schema_name + " was expected");
  if (env.schema_id() != schema_id)
    return make_error(errc::wrong_message_type, std::string{"expected "} + schema_name +
                                                    ", got schema id " +
                                                    std::to_string(env.schema_id()));
  if (env.size_words() > envelope_words_max)
    return make_error(errc::limit_exceeded, "envelope above the size limit");
  if (!env.checksum_ok())
    return make_error(errc::message_checksum,
                      std::string{schema_name} + " does not match its checksum");
  return caf::none;
}

} // namespace crescent::detail
