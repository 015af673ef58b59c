@0x850f66f4869d9af4;
# Protocol of the conductor: placement of requests, and the reports it learns load and
# cache contents from.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");
using Common = import "common.capnp";

# request -> conductor: where should this request run?
struct ScheduleRequest {
  requestId @0 :UInt64;
  promptTokens @1 :UInt32;        # at most the model's context limit
  maxNewTokens @2 :UInt32;
  blockKeys @3 :List(Common.BlockKey);     # chained keys of the prompt's full blocks, in order
  # A request placed again after a failed attempt (request_retries_max) names the instances
  # that attempt used, so that this placement takes others where there are (each below the
  # conductor's instance count, at most 64 each).
  avoidPrefill @4 :List(UInt32);
  avoidDecode @5 :List(UInt32);
}

struct Placement {
  prefillInstance @0 :UInt32;
  decodeInstance @1 :UInt32;
  cachedBlocks @2 :UInt32;        # prefix blocks the conductor believes the prefill node holds
  reuseBlocks @3 :UInt32;         # prefix blocks it expects the prefill to reuse
  pull @4 :Bool;                  # read them from other nodes too, and keep a copy locally
  predictedTtftNs @5 :UInt64;
  predictedTbtNs @6 :UInt64;
}

# conductor -> request
struct ScheduleReply {
  requestId @0 :UInt64;
  union {
    placed @1 :Placement;
    rejected @2 :Text;            # why, for the user
  }
  retryAfterMs @3 :UInt64;        # rejected: when a retry may be admitted (0: unknown)
}

# prefill worker (or coupled instance) -> conductor, when a prefill job ends (either way).
struct PrefillReport {
  requestId @0 :UInt64;
  instance @1 :UInt32;
  node @2 :UInt32;
  ok @3 :Bool;
  computedTokens @4 :UInt32;
  reusedTokens @5 :UInt32;
  computeNs @6 :UInt64;
  storedKeys @7 :List(Common.BlockKey);    # blocks in DRAM because of this job: newly committed,
                                  # copied here, or read back from an SSD tier
  storedOn @8 :List(UInt64);      # per stored key, 4 words: the nodes holding its replicas
                                  # (bit n % 64 of word n / 64: node ids below 256)
                                  # (empty: the reporting node)
  pulledBlocks @9 :UInt32;        # cached blocks read from another node (0: none)
  pullNs @10 :UInt64;             # the loads' time, from the first read to the last verified
  pulledFrom @11 :UInt32;         # the node the first of them came from
  storeNs @12 :UInt64;            # how long the store ran after the job left the compute slot
                                  # (the next job ran meanwhile)
  droppedKeys @13 :List(Common.BlockKey);  # a coupled instance's: blocks its own cache evicted since its
                                  # last report (its node no longer holds them)
}

# store master -> conductor: these blocks left this node's DRAM (evicted), so that the prefix
# index does not promise them there.
struct BlocksGone {
  node @0 :UInt32;
  keys @1 :List(Common.BlockKey);          # at most 4096
  offloaded @2 :List(Bool);                # empty, or one per key: the node keeps it on its SSD
                                           # tier (a load reads it from the drive first)
}

# request -> conductor, when a request ends (completed, rejected after placement, failed).
struct RequestReport {
  requestId @0 :UInt64;
  completed @1 :Bool;
}

# conductor -> store master, when the conductor's view of a node changes: the cluster has one
# membership view, the conductor's (heartbeats of the node agents with a timeout), for placement
# and for the pool alike.
struct NodeStatus {
  node @0 :UInt32;
  live @1 :Bool;
  reason @2 :Text;                         # why it is not live; at most 512 bytes
}

# node agent -> conductor, every heartbeat interval.
struct Heartbeat {
  node @0 :UInt32;
  sequence @1 :UInt64;
}

struct ConductorStats {
  placed @0 :UInt64;
  rejected @1 :UInt64;
  badMessages @2 :UInt64;
  liveNodes @3 :UInt32;
  prefillQueueJobs @4 :List(UInt32);  # per prefill instance
  decodeActive @5 :List(UInt32);      # per decode instance
  prefillQueueNs @6 :List(UInt64);    # per prefill instance: predicted until it is free of its jobs
  indexedBlocks @7 :UInt64;           # blocks the prefix index has in some node's DRAM
  ssdIndexedBlocks @8 :UInt64;        # blocks it has on some node's SSD tier
  requestsInFlight @9 :UInt64;        # placed, their end not yet known: in the load view
}
