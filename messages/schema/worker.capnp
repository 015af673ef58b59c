@0x9f27873abb131335;
# Protocols of the prefill and decode workers.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");
using Common = import "common.capnp";

# request -> decode worker: reserve KV memory for a request's whole life.
struct ReserveRequest {
  requestId @0 :UInt64;
  promptTokens @1 :UInt32;
  maxNewTokens @2 :UInt32;
}

# decode worker -> request: one handle per KV page, in token order. Page i holds tokens
# [i * blockTokens, (i + 1) * blockTokens).
struct ReserveReply {
  requestId @0 :UInt64;
  blockTokens @1 :UInt32;
  pages @2 :List(Common.RegionHandle);
}

# request -> decode worker: give the reservation back (the request failed before decoding).
struct ReleaseRequest {
  requestId @0 :UInt64;
}

# request -> prefill worker.
struct PrefillJob {
  requestId @0 :UInt64;
  tokens @1 :List(UInt32);                 # the whole prompt
  blockKeys @2 :List(UInt64);              # keys of its blocks, in order (the last may be partial)
  decodeInstance @3 :UInt32;
  decodePages @4 :List(Common.RegionHandle);  # from ReserveReply
  pull @5 :Bool;  # cached blocks may come from other nodes' pools, and are then stored in its
                  # own (the conductor's Algorithm 1); false: only its own node's are loaded
}

# prefill worker -> request, on admission to its queue.
struct PrefillAccepted {
  requestId @0 :UInt64;
  queuedJobs @1 :UInt32;                   # jobs ahead of this one
}

# prefill worker -> decode worker: the prompt's KV is in the reserved pages.
struct KvReady {
  requestId @0 :UInt64;
  promptTokens @1 :UInt32;
  firstToken @2 :UInt32;                   # greedy token after the prompt
}

struct WorkerStats {
  instance @0 :UInt32;
  queuedJobs @1 :UInt32;
  activeRequests @2 :UInt32;
  freePages @3 :UInt32;
  badMessages @4 :UInt64;
  computeNs @5 :UInt64;
  loadMisses @6 :UInt64;                   # pool blocks rejected by checksum or transport
}
