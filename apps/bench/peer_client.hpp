// Starting a transfer peer process and learning, through its actor, how to reach its region.
// The actor system passed in must have CAF's middleman loaded.
#pragma once

#include "apps/bench/child_process.hpp"
#include "apps/bench/transfer_peer.hpp"
#include "transport/transfer_types.hpp"

#include <caf/actor_system.hpp>

namespace crescent::bench {

struct remote_peer {
  child_process process;
  transfer_peer_actor actor;
  transport::peer_info info;
  transport::region_handle region;
  uint16_t sink_port = 0;
  std::string cpus; // those it may run on, as it says (to_text of cpu_sets.hpp)
  // The region of GPU memory it serves (transfer_peer_options::gpu_mib), or why there is none.
  caf::expected<transport::region_handle> gpu_region{caf::error{}};
};

/// Runs `executable transfer-peer ...` and connects to it.
caf::expected<remote_peer> start_transfer_peer(caf::actor_system& sys,
                                               const std::string& executable,
                                               const transfer_peer_options& opt);

/// xxh3 of bytes [offset, offset + length) of the peer's region, computed by the peer.
caf::expected<uint64_t> remote_digest(caf::actor_system& sys, const transfer_peer_actor& peer,
                                      uint64_t offset, uint64_t length);

} // namespace crescent::bench
