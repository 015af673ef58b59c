// Transfer faults (fail_transfer, corrupt, delay_transfer) of a fault plan in the processes of a
// real cluster
// (`crescent up`). Each process's transfer engine gets one hook before it moves any KV; the hook
// takes nothing until a fault is switched on. The fault runner switches each fault on at its
// at_ms and off at its end with a queued signal (sigqueue) to every process of the cluster, its
// own included, as it pauses and kills node processes with signals: a signal reaches a process
// whatever its actors are doing, and one queued to a stopped process waits until it continues.
// While a fault is on, the hook takes each attempt at a slice whose remote end is on the fault's
// node (any node, without one) with the fault's probability, drawn from the run's seed and the
// process's node; the engine then fails the slice, changes its bytes, or holds it delay_ms in its
// delay line before it starts (transfer_engine::set_fault_hook, fault_delays::held: the
// in-process, shared-memory and TCP paths; RDMA and CUDA slices are not taken).
//
// Limits: at most transfer_faults_max transfer faults a plan (fault_plan.hpp); the processes must
// be on this host (signals), started by crescent up itself or by a launcher whose command passes
// `{faults}` on.
#pragma once

#include "apps/up/fault_plan.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crescent::up {

/// What a process needs of one transfer fault: the rest (when) is the runner's.
struct transfer_fault_spec {
  fault_kind kind = fault_kind::fail_transfer; // fail_transfer, corrupt or delay_transfer
  double probability = 1.0;                    // of each matching slice, (0, 1]
  std::optional<uint32_t> node;                // the slice's remote end; none: any
  uint64_t delay_ms = 0;                       // delay_transfer only: [1, fault_delay_ms_max]
  bool operator==(const transfer_fault_spec&) const = default;
};

/// What a transfer fault of `kind` (fail_transfer, corrupt or delay_transfer, held `delay_ms`)
/// does to a slice it takes: the engine's verdict, in real and in simulated time alike.
inline transport::slice_verdict slice_verdict_of(fault_kind kind, uint64_t delay_ms) {
  switch (kind) {
  case fault_kind::corrupt:
    return transport::slice_fault::corrupt;
  case fault_kind::delay_transfer:
    return {transport::slice_fault::delay, std::chrono::milliseconds(delay_ms)};
  default:
    return transport::slice_fault::fail;
  }
}

/// The plan's transfer faults in plan order: a fault's place here is its ordinal.
std::vector<transfer_fault_spec> transfer_faults_of(const fault_plan& plan);

/// "fail_transfer:0.05:2,corrupt:0.01:any,delay_transfer:0.1:3:20" (KIND:PROBABILITY:NODE, and
/// :DELAY_MS for a delay), what `crescent node --transfer-faults` reads back.
std::string format_transfer_faults(const std::vector<transfer_fault_spec>& faults);

/// Errors (bad_config) name the entry and what is wrong with it.
caf::expected<std::vector<transfer_fault_spec>> parse_transfer_faults(const std::string& text);

/// Installs this process's signal handler and `engine`'s hook, every fault switched off and the
/// counts at zero; replaces an earlier install. No batch may be in flight on `engine`. `seed`
/// and `node` (this process's) pick the draws.
caf::error install_transfer_faults(transport::transfer_engine& engine,
                                   std::vector<transfer_fault_spec> faults, uint64_t seed,
                                   uint32_t node);

/// Switches fault `ordinal` on or off in process `pid` (getpid(): this one). Errors: the signal
/// could not be queued (the process is gone), with the reason.
caf::error switch_transfer_fault(pid_t pid, size_t ordinal, bool on);

/// The slice attempts this process's hook took since its install (an engine tries a failed
/// slice again: transfer_options::slice_attempts_max).
struct transfer_faults_taken {
  uint64_t failed = 0;
  uint64_t corrupted = 0;
  uint64_t delayed = 0;
};
transfer_faults_taken transfer_faults_taken_here();

} // namespace crescent::up
