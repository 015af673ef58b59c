// The version of Crescent's messages as a whole: processes of one cluster must speak the same.
//
// Cap'n Proto lets an older reader skip fields it does not know, which is right for adding a
// field and wrong for changing what one means: a list of 64-bit block keys read as BlockKey
// structs yields other keys, silently. The join of a node process carries this number both ways
// (NodeJoin, NodeWelcome), and a process refuses a peer of another version with both numbers.
#pragma once

#include "messages/errors.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace crescent {

/// 0: before the field existed (64-bit block keys); 1: 128-bit block keys (BlockKey).
inline constexpr uint32_t wire_version = 1;

/// None when `theirs` is this build's version; else invalid_argument naming both: "`who` speaks
/// wire version N, `us` M (...)".
inline caf::error check_wire_version(uint32_t theirs, std::string_view who, std::string_view us) {
  if (theirs == wire_version)
    return caf::none;
  return make_error(errc::invalid_argument,
                    std::string{who} + " speaks wire version " + std::to_string(theirs) + ", " +
                        std::string{us} + " " + std::to_string(wire_version) +
                        " (messages/wire_version.hpp): run the same Crescent build everywhere");
}

} // namespace crescent
