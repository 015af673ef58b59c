// The one error vocabulary of Crescent. Every fallible function returns caf::expected<T> (or
// caf::error) built from these codes, with a sentence of context naming what failed; nothing
// throws across an actor handler or a library boundary.
#pragma once

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>

namespace crescent {

enum class errc : uint8_t {
  none = 0,
  malformed_message,  // bytes that do not decode as the expected Cap'n Proto message
  wrong_message_type, // a well-formed message of another schema
  message_checksum,   // the envelope's bytes were changed after sealing
  limit_exceeded,     // a count or size above its documented limit
  invalid_argument,   // a value outside its domain (zero length, unknown id, ...)
  not_found,          // no such key, region, request or instance
  already_exists,
  no_space,          // a pool, queue or budget is full
  access_denied,     // a region access key did not match
  out_of_range,      // an offset/length outside a region
  checksum_mismatch, // stored bytes no longer match their recorded checksum
  io_error,          // RocksDB, file or socket failure
  unavailable,       // the device, backend or peer is not there
  timeout,
  cancelled,  // the caller cancelled the operation
  rejected,   // admission control said no
  bad_config, // a configuration field is missing or invalid
  bad_trace,  // a trace line does not parse
  internal,   // a broken invariant that was caught instead of crashing
  // Keep `internal` last: peers check that a status on the wire is a code (tcp::refusal_of).
};

/// The CAF error category of errc values.
inline constexpr caf::atom_value error_category = caf::atom("crescent");

const char* to_string(errc code);

/// Builds an error with a human-readable context sentence.
caf::error make_error(errc code, std::string context);

/// Renders any error (ours or CAF's) as one line for people.
std::string describe(const caf::error& err);

/// True if `err` is the Crescent error `code`.
bool is(const caf::error& err, errc code);

} // namespace crescent
