// Code probes, after FoundationDB's CODE_PROBE: a rare path says, where it runs, that it ran.
// The process counts the probes hit; `crescent chaos` reports which of the listed probes its
// seeds reached and names those none did, so that a rare path no campaign exercises shows up as
// such instead of being trusted. `code_probes` lists every probe the sources mark, with what it
// marks; tests/actors/code_probe_test.cpp checks that the list and the sources agree, so that a
// probe is neither marked unlisted nor listed after its path is gone.
//
// A probe costs a lookup in a short list and an atomic increment: for rare paths only.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace crescent {

struct code_probe {
  std::string_view name;  // "owner.victim_steps_aside": the role, then the path
  std::string_view marks; // what happened when it is hit
};

inline constexpr code_probe code_probes[] = {
    {"prefill.fail_waits_for_reads", "a failing prefill job waits for its reads or step in flight"},
    {"prefill.handoff_failed", "a batch of a KV hand-off to decode failed"},
    {"prefill.stage_failed", "a stage of a prefill group failed a chunk"},
    {"prefill.requester_gone", "the request of the running prefill job ended (its actor is "
                               "gone) and the job stopped"},
    {"prefill.job_after_its_cancel", "a prefill job came after its request's cancel and was "
                                     "refused"},
    {"request.decode_elsewhere", "a decode reservation refused for lack of memory went to the "
                                 "next decode instance"},
    {"request.deadline", "a request failed at its deadline"},
    {"decode.kv_ready_unreserved", "kv_ready named a request this decode worker holds no "
                                   "reservation for (released meanwhile)"},
    {"pool.read_failed_next_replica", "a block's read failed and the next replica was tried"},
    {"pool.read_corrupt_replica", "a block read back did not match its checksum"},
    {"owner.victim_steps_aside", "the store master refused an eviction victim (leased, pinned "
                                 "or pending), which stepped aside"},
    {"master.allocation_abandoned", "an owner was lost while allocating a put's blocks"},
};

/// Counts a hit of the probe `name`, which must be in code_probes (a programmer error
/// otherwise: asserted, and not counted). Thread-safe.
void hit_probe(std::string_view name);

/// The hits since the process started (or the last reset_probes), by index in code_probes.
std::vector<uint64_t> probe_hits();

/// The hits of the probe `name` alone (0 for a name not listed).
uint64_t probe_hits(std::string_view name);

void reset_probes();

} // namespace crescent

#define CRESCENT_PROBE(name) ::crescent::hit_probe(name)
