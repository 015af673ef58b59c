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
  prefillInstance @3 :UInt32;  # the one placed: only it may say the KV is in (KvReady)
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
  blockKeys @2 :List(Common.BlockKey);              # keys of its blocks, in order (the last may be partial)
  decodeInstance @3 :UInt32;
  decodePages @4 :List(Common.RegionHandle);  # from ReserveReply
  pull @5 :Bool;  # cached blocks may come from other nodes' pools, and are then stored in its
                  # own (the conductor's Algorithm 1); false: only its own node's are loaded
  kvSend @6 :Common.KvSend;  # from the RequestSpec
}

# request -> coupled instance (a prefill and decode engine in one, docs/coupled.md): prefill this
# prompt and decode it in the instance's own continuous batch.
struct CoupledJob {
  requestId @0 :UInt64;
  tokens @1 :List(UInt32);                 # the whole prompt
  blockKeys @2 :List(Common.BlockKey);              # keys of its blocks, in order (the last may be partial)
  maxNewTokens @3 :UInt32;
}

# request -> coupled instance, when the request has heard nothing from it for a while (its quiet
# watch, coupled_quiet_timeout): does the instance still hold the job, and how far has it got?
struct JobProbe {
  requestId @0 :UInt64;
}

# coupled instance -> request: the answer. Tokens it sent that never came are lost for good (an
# instance keeps no copy), so the request fails them or continues elsewhere.
struct JobProbeReply {
  requestId @0 :UInt64;
  held @1 :Bool;         # waiting or running there: more is to come; false: ended, or never taken
  sentTokens @2 :UInt32; # output tokens sent to the request so far, the first included
}

# prefill worker (or coupled instance) -> request, on admission to its queue.
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
  codecErrors @7 :UInt64;                  # blocks a KV codec could not encode or decode
}

# Chunked pipeline parallelism (docs/prefill.md): a prefill group of X instances shares the
# model's layers, stage k holding [k L/X, (k+1) L/X). The group's first instance (its head)
# takes the group's jobs, loads the cached prefix into its pages and computes stage 0; every
# message below is checked for its sender (the head, or the stage before or after).

# head -> stage k > 0: compute your layers of this prompt, chunk by chunk as the streams come.
struct StageJob {
  requestId @0 :UInt64;
  tokens @1 :List(UInt32);                   # the whole prompt
  cachedTokens @2 :UInt32;                   # the prefix whose KV the head's pages hold
  headPages @3 :List(Common.RegionHandle);   # the head's pages: read the prefix's layers from
                                             # them, write your layers' KV into them
  decodeInstance @4 :UInt32;
  decodePages @5 :List(Common.RegionHandle); # write your layers' KV into them as well
}

# stage k -> head: the job is taken (its pages are allocated).
struct StageAccepted {
  requestId @0 :UInt64;
  stage @1 :UInt32;
}

# stage k -> stage k - 1: where each chunk's stream goes (slot c: chunk c's), in registered
# memory that the transfer engine writes.
struct StageInbox {
  requestId @0 :UInt64;
  slots @1 :List(Common.RegionHandle);
}

# stage k - 1 -> stage k: chunk c's stream has landed in slot c of the inbox.
struct StageChunk {
  requestId @0 :UInt64;
  chunk @1 :UInt32;
}

# stage k -> head: every chunk computed and its KV written (ok), or why not; sent once all of
# the stage's transfers have ended, so the head's pages are no longer written.
struct StageDone {
  requestId @0 :UInt64;
  stage @1 :UInt32;
  ok @2 :Bool;
  reason @3 :Text;
  firstToken @4 :UInt32;  # the last stage's: the greedy token after the prompt
  computeNs @5 :UInt64;   # the stage's busy time
  tailNs @6 :UInt64;      # from the end of its last compute to this message (its KV's tail)
}

# head -> stage k: stop this job (it failed); answered by StageDone once nothing is in flight.
struct StageAbort {
  requestId @0 :UInt64;
}
