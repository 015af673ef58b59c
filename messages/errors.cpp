#include "messages/errors.hpp"

#include <caf/message.hpp>
#include <caf/sec.hpp>

namespace crescent {

const char* to_string(errc code) {
  switch (code) {
  case errc::none:
    return "none";
  case errc::malformed_message:
    return "malformed_message";
  case errc::wrong_message_type:
    return "wrong_message_type";
  case errc::message_checksum:
    return "message_checksum";
  case errc::limit_exceeded:
    return "limit_exceeded";
  case errc::invalid_argument:
    return "invalid_argument";
  case errc::not_found:
    return "not_found";
  case errc::already_exists:
    return "already_exists";
  case errc::no_space:
    return "no_space";
  case errc::access_denied:
    return "access_denied";
  case errc::out_of_range:
    return "out_of_range";
  case errc::checksum_mismatch:
    return "checksum_mismatch";
  case errc::io_error:
    return "io_error";
  case errc::unavailable:
    return "unavailable";
  case errc::timeout:
    return "timeout";
  case errc::cancelled:
    return "cancelled";
  case errc::rejected:
    return "rejected";
  case errc::bad_config:
    return "bad_config";
  case errc::bad_trace:
    return "bad_trace";
  case errc::internal:
    return "internal";
  }
  return "unknown";
}

caf::error make_error(errc code, std::string context) {
  return caf::error{static_cast<uint8_t>(code), error_category,
                    caf::make_message(std::move(context))};
}

std::string describe(const caf::error& err) {
  if (!err)
    return "no error";
  if (err.category() != error_category)
    return caf::to_string(err);
  std::string out = to_string(static_cast<errc>(err.code()));
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) {
    out += ": ";
    out += ctx.get_as<std::string>(0);
  }
  return out;
}

bool is(const caf::error& err, errc code) {
  return err.category() == error_category && err.code() == static_cast<uint8_t>(code);
}

} // namespace crescent
