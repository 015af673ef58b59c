// The version of Crescent's messages as a whole: processes of one cluster must speak the same.
//
// Cap'n Proto lets an older reader skip fields it does not know, which is right for adding a
// field and wrong for changing what one means: a list of 64-bit block keys read as BlockKey
// structs yields other keys, silently. The join of a node process carries this number both ways
// (NodeJoin, NodeWelcome), and a process refuses a peer of another version with both numbers.
#pragma once

#include <cstdint>

namespace crescent {

/// 0: before the field existed (64-bit block keys); 1: 128-bit block keys (BlockKey).
inline constexpr uint32_t wire_version = 1;

} // namespace crescent
