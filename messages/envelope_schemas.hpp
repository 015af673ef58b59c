// Every Cap'n Proto struct that travels as the root of an envelope, in one list: each is
// registered with CAF as its own typed_envelope (so that processes agree on the name CAF writes
// before its bytes), and code that looks at messages whatever their schema (the simulator's
// message log, fault injection) finds the envelope in a message through envelope_in.
// A struct sent as an envelope but missing here does not reach another process intact (CAF 0.17
// cannot name it there; registration.hpp); tests/messages round-trips every one listed.
#pragma once

#include "messages/envelope.hpp"
#include "messages/schema/bench.capnp.h"
#include "messages/schema/cluster.capnp.h"
#include "messages/schema/common.capnp.h"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"
#include "messages/schema/store.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/type_erased_tuple.hpp>
#include <capnp/schema.h>

#include <cstddef>
#include <string>

namespace crescent {

template <class... Ts>
struct schema_list {
  static constexpr size_t size = sizeof...(Ts);
};

using envelope_schemas = schema_list<
    // common, bench
    wire::Ack, wire::TransportPeer, wire::RegionHandle, wire::ByteRange, wire::Digest,
    // cluster bring-up
    wire::NodeJoin, wire::NodeWelcome, wire::ClusterDirectory,
    // conductor
    wire::ScheduleRequest, wire::ScheduleReply, wire::PrefillReport, wire::RequestReport,
    wire::BlocksGone, wire::Heartbeat, wire::ConductorStats, wire::NodeStatus,
    // request
    wire::RequestSpec, wire::PrefillDone, wire::TokenBatch, wire::RequestFailed,
    wire::RequestOutcome,
    // workers
    wire::ReserveRequest, wire::ReserveReply, wire::ReleaseRequest, wire::PrefillJob,
    wire::CoupledJob, wire::JobProbe, wire::JobProbeReply, wire::PrefillAccepted, wire::KvReady,
    wire::WorkerStats, wire::StageJob, wire::StageAccepted, wire::StageInbox, wire::StageChunk,
    wire::StageDone, wire::StageAbort,
    // store master and block owners
    wire::PutStart, wire::PutStartReply, wire::PutCommit, wire::PutRevoke, wire::Get,
    wire::GetReply, wire::Exists, wire::ExistsReply, wire::Remove, wire::Pin, wire::Unpin,
    wire::ReportCorrupt, wire::VerifyBlock, wire::VerifyReply, wire::StoreStats, wire::Allocate,
    wire::AllocateReply, wire::FreeBlocks, wire::Promote, wire::PromoteReply, wire::Touch,
    wire::OwnerHeartbeat, wire::EvictRequest, wire::EvictReply, wire::OwnerReport,
    wire::OwnerReportReply, wire::PoolPeers, wire::OwnerStats>;

/// The name CAF writes before a typed_envelope<T>'s bytes: "crescent.envelope." and the
/// schema's short name.
template <class T>
std::string envelope_type_name_of() {
  return std::string{"crescent.envelope."} + capnp::Schema::from<T>().getShortDisplayName().cStr();
}

/// The envelope at position `i` of a message, whatever its schema; null where that element is
/// no envelope.
const envelope* envelope_in(const caf::type_erased_tuple& content, size_t i);

} // namespace crescent
