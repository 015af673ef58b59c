// Where the KV pool puts the replicas of a new block (store master's PutStart).
#pragma once

#include <string_view>

namespace crescent {

enum class placement_policy {
  local_first, // the writer's node first, then the most free
  most_free,   // the nodes with the most free DRAM
  random,      // any live nodes
};

/// Parses "local_first", "most_free" or "random".
inline bool parse(std::string_view text, placement_policy& out) {
  if (text == "local_first")
    out = placement_policy::local_first;
  else if (text == "most_free")
    out = placement_policy::most_free;
  else if (text == "random")
    out = placement_policy::random;
  else
    return false;
  return true;
}

inline const char* to_string(placement_policy p) {
  switch (p) {
  case placement_policy::local_first:
    return "local_first";
  case placement_policy::most_free:
    return "most_free";
  case placement_policy::random:
    return "random";
  }
  return "local_first";
}

} // namespace crescent
