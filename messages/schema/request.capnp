@0xa748564e1bfb3fcc;
# Protocol of the request actor: a client submits a spec and gets the outcome; workers report
# progress to it.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");
using Common = import "common.capnp";

# client -> request actor.
struct RequestSpec {
  requestId @0 :UInt64;         # below 2^56: the top byte numbers a request's attempts
  tokens @1 :List(UInt32);
  blockKeys @2 :List(Common.BlockKey);
  maxNewTokens @3 :UInt32;
  deadlineMs @4 :UInt32;        # the request fails with a reason if not done by then
  kvSend @5 :Common.KvSend;     # how its prefill sends KV to decode (an experiment's A/B)
}

# prefill worker -> request actor.
struct PrefillDone {
  requestId @0 :UInt64;
  firstToken @1 :UInt32;
  computedTokens @2 :UInt32;
  reusedTokens @3 :UInt32;
  loadMisses @4 :UInt32;
  computeNs @5 :UInt64;
  remoteReusedTokens @6 :UInt32;  # of reusedTokens, those read from another node's DRAM
                                  # where they already were (not read back from SSD for it)
  kvTailNs @7 :UInt64;   # from the end of compute until the last of the KV reached decode
  kvBusyNs @8 :UInt64;   # the time some of the KV was in flight to decode
  queueNs @9 :UInt64;    # from the job's acceptance until it started
  stageComputeNs @10 :List(UInt64);  # a prefill group's job: each stage's busy time (else empty)
  ssdReusedTokens @11 :UInt32;   # of reusedTokens, those read back from an SSD tier for it
  pulledFrom @12 :List(UInt32);  # the other nodes whose DRAM its reused blocks were read from,
                                 # each once, in the order of their first block (empty: none)
}

# decode worker -> request actor, once per decode step that produced tokens for it.
struct TokenBatch {
  requestId @0 :UInt64;
  tokens @1 :List(UInt32);
  final @2 :Bool;
  # The output index of its first token (0: the prompt's first token, which prefill computes),
  # so that a request puts batches in order and drops the ones it already has, whatever the
  # network did to them on the way.
  first @3 :UInt32;
}

# any worker -> request actor: the request cannot go on.
struct RequestFailed {
  requestId @0 :UInt64;
  reason @1 :Text;
}

enum Status {
  completed @0;
  rejected @1;
  failed @2;
}

# request actor -> client. Times are nanoseconds on the actor clock (simulated in tests).
struct RequestOutcome {
  requestId @0 :UInt64;
  status @1 :Status;
  reason @2 :Text;
  arrivalNs @3 :Int64;
  tokenTimesNs @4 :List(Int64);  # one per generated token; the first is the TTFT point
  tokens @5 :List(UInt32);
  computedTokens @6 :UInt32;
  reusedTokens @7 :UInt32;
  loadMisses @8 :UInt32;
  prefillInstance @9 :UInt32;
  decodeInstance @10 :UInt32;
  prefillComputeNs @11 :UInt64;   # the prefill's compute time (measured, or modeled)
  remoteReusedTokens @12 :UInt32; # of reusedTokens, those read from another node's DRAM
                                  # where they already were (not read back from SSD for it)
  predictedTtftNs @13 :UInt64;    # the conductor's prediction at placement (0: not placed)
  retryAfterMs @14 :UInt64;       # rejected by the conductor: when a retry may be admitted
  kvTailNs @15 :UInt64;           # the KV's arrival at decode after prefill compute ended
  kvBusyNs @16 :UInt64;           # the time some of the KV was in flight to decode
  prefillQueueNs @17 :UInt64;     # the prefill job's wait in its instance's queue
  stageComputeNs @18 :List(UInt64); # a prefill group's job: each stage's busy time (else empty)
  ssdReusedTokens @19 :UInt32;    # of reusedTokens, those read back from an SSD tier for it
  pulledFrom @20 :List(UInt32);   # the other nodes its reused blocks were read from (PrefillDone)
  retries @21 :UInt32;            # attempts placed again after a failure (request_retries_max)
}
