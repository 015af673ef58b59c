// Every Cap'n Proto struct that travels as an envelope root, and a filler that sets every field
// of any of them to a non-default value through Cap'n Proto's dynamic API, so that tests cover
// fields added later without being edited.
#pragma once

#include "messages/envelope.hpp"
#include "messages/schema/bench.capnp.h"
#include "messages/schema/common.capnp.h"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/request.capnp.h"
#include "messages/schema/store.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <capnp/dynamic.h>
#include <capnp/message.h>
#include <capnp/schema.h>
#include <gtest/gtest.h>

namespace crescent::testing {

using envelope_roots = ::testing::Types<
    wire::Ack, wire::TransportPeer, wire::ScheduleRequest, wire::ScheduleReply, wire::PrefillReport,
    wire::RequestReport, wire::BlocksGone, wire::Heartbeat, wire::ConductorStats,
    wire::ReserveRequest, wire::ReserveReply, wire::ReleaseRequest, wire::PrefillJob,
    wire::CoupledJob, wire::PrefillAccepted, wire::KvReady, wire::WorkerStats, wire::RequestSpec,
    wire::PrefillDone, wire::TokenBatch, wire::RequestFailed, wire::RequestOutcome, wire::PutStart,
    wire::PutStartReply, wire::PutCommit, wire::PutRevoke, wire::Get, wire::GetReply, wire::Exists,
    wire::ExistsReply, wire::Remove, wire::Pin, wire::Unpin, wire::ReportCorrupt, wire::VerifyBlock,
    wire::VerifyReply, wire::StoreStats, wire::Allocate, wire::AllocateReply, wire::FreeBlocks,
    wire::Promote, wire::PromoteReply, wire::Touch, wire::OwnerHeartbeat, wire::EvictRequest,
    wire::EvictReply, wire::OwnerReport, wire::OwnerReportReply, wire::PoolPeers, wire::OwnerStats,
    wire::ByteRange, wire::Digest, wire::ObjectRecord, wire::StageJob, wire::StageAccepted,
    wire::StageInbox, wire::StageChunk, wire::StageDone, wire::StageAbort>;

/// Sets every field of `s` (the first member of each union) to a value other than its default.
void fill_struct(capnp::DynamicStruct::Builder s, uint64_t seed, int depth = 0);

/// A sealed envelope of schema T with every field set.
template <class T>
envelope sample_envelope(uint64_t seed = 7) {
  capnp::MallocMessageBuilder builder;
  auto root = builder.initRoot<capnp::DynamicStruct>(capnp::Schema::from<T>());
  fill_struct(root, seed);
  return envelope::seal(capnp::typeId<T>(), builder);
}

/// The first `count` words of an envelope, copied.
kj::Array<capnp::word> prefix_words(const envelope& env, size_t count);

/// Damaged bytes sealed with a matching checksum: what a buggy or hostile sender produces.
envelope reseal(uint64_t schema_id, kj::Array<capnp::word> words);

/// The envelope with one bit flipped and its original checksum kept.
envelope flip(const envelope& env, size_t bit);

} // namespace crescent::testing
