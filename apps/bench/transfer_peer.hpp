// The transfer peer: a helper process that owns one registered region and serves it through its
// transfer engine (TCP data-plane server, shared-memory region table). Other processes learn how
// to reach it, and the region's handle, from its actor over CAF's network layer. It is the
// other side of `crescent bench transfer` and of the multi-process transport tests.
//
// With --gpu-mib it also serves a region of GPU memory (cuda:0), or says why it cannot.
//
// Started as `crescent transfer-peer`, it prints one line
//   crescent-transfer-peer actor-port=<p> sink-port=<q> pid=<pid> cpus=<CPUs it may run on>
// and serves until its standard input closes (its parent ended) or it is killed. The sink port
// accepts plain TCP streams and discards them: the baseline of the TCP benchmark.
#pragma once

#include "messages/atoms.hpp"
#include "messages/envelope_schemas.hpp"

#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include <cstdint>

namespace crescent::bench {

using peer_atom = caf::atom_constant<caf::atom("peer")>;
using region_atom = caf::atom_constant<caf::atom("region")>;
using digest_atom = caf::atom_constant<caf::atom("digest")>;
using gpu_region_atom = caf::atom_constant<caf::atom("gpuregion")>;

using transfer_peer_actor = caf::typed_actor<
    // -> TransportPeer: how to reach this process's engine
    caf::replies_to<peer_atom>::with<typed_envelope<wire::TransportPeer>>,
    // -> RegionHandle of the served region
    caf::replies_to<region_atom>::with<typed_envelope<wire::RegionHandle>>,
    // -> RegionHandle of the served GPU region, or unavailable with the reason there is none
    caf::replies_to<gpu_region_atom>::with<typed_envelope<wire::RegionHandle>>,
    // ByteRange -> Digest (xxh3) of those bytes of the region, to check what others wrote
    caf::replies_to<digest_atom,
                    typed_envelope<wire::ByteRange>>::with<typed_envelope<wire::Digest>>>;

struct transfer_peer_options {
  uint32_t node = 1;
  uint64_t region_mib = 256;
  bool shm = true;
  bool tcp = true;
  uint64_t gpu_mib = 0; // > 0: also serve a region of that size on cuda:0, where there is one
  std::string cpus;     // non-empty: run on these CPUs only (cpu_sets.hpp: parse_cpu_list)
};

/// Runs the peer process; returns its exit status.
int run_transfer_peer(const transfer_peer_options& opt);

} // namespace crescent::bench
