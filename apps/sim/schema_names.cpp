#include "apps/sim/schema_names.hpp"

#include "messages/schema/bench.capnp.h"
#include "messages/schema/cluster.capnp.h"
#include "messages/schema/common.capnp.h"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"
#include "messages/schema/store.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <capnp/schema.h>
#include <fmt/format.h>

#include <unordered_map>

namespace crescent::sim {

namespace {

template <class... Ts>
std::unordered_map<uint64_t, std::string> names_of() {
  std::unordered_map<uint64_t, std::string> out;
  (out.emplace(capnp::typeId<Ts>(), capnp::Schema::from<Ts>().getShortDisplayName().cStr()), ...);
  return out;
}

} // namespace

std::string schema_name(uint64_t schema_id) {
  // Every struct of messages/schema/; one that is missing shows as its id.
  static const auto names = names_of<
      wire::ByteRange, wire::Digest, wire::NodeJoin, wire::NodeWelcome, wire::ClusterDirectory,
      wire::RegionHandle, wire::BlockKey, wire::Ack, wire::TransportPeer, wire::ScheduleRequest,
      wire::Placement, wire::BlocksGone, wire::NodeStatus, wire::ScheduleReply, wire::PrefillReport,
      wire::RequestReport, wire::Heartbeat, wire::ConductorStats, wire::RequestSpec,
      wire::PrefillDone, wire::TokenBatch, wire::RequestFailed, wire::RequestOutcome,
      wire::PutStart, wire::PutSlot, wire::PutStartReply, wire::PutCommit, wire::PutRevoke,
      wire::Get, wire::BlockLocation, wire::GetReply, wire::Exists, wire::ExistsReply, wire::Remove,
      wire::Pin, wire::Unpin, wire::ReportCorrupt, wire::VerifyBlock, wire::VerifyReply,
      wire::StoreStats, wire::Allocate, wire::AllocateReply, wire::FreeBlocks, wire::Promote,
      wire::PromoteReply, wire::Touch, wire::OwnerHeartbeat, wire::EvictRequest, wire::EvictReply,
      wire::OwnerBlock, wire::OwnerReport, wire::PoolPeers, wire::OwnerReportReply,
      wire::OwnerStats, wire::Replica, wire::ObjectRecord, wire::ReserveRequest, wire::ReserveReply,
      wire::ReleaseRequest, wire::PrefillJob, wire::CoupledJob, wire::JobProbe, wire::JobProbeReply,
      wire::PrefillAccepted, wire::KvReady, wire::WorkerStats, wire::StageJob, wire::StageAccepted,
      wire::StageInbox, wire::StageChunk, wire::StageDone, wire::StageAbort>();
  auto i = names.find(schema_id);
  return i != names.end() ? i->second : fmt::format("{:#x}", schema_id);
}

} // namespace crescent::sim
