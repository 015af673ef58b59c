// Which CPUs the two processes of `crescent bench transfer` run on (`--cpus`), as iperf3's -A
// and netperf's -T pin their two ends.
//
// Why: on the 2-vCPU VMs these figures come from, the kernel does not preempt (PREEMPT_NONE)
// and knows no cache topology, so it wakes a thread on its last CPU even when that CPU is busy
// inside a long system call of another thread; the woken thread waits for the whole call. When
// the peer's server thread lands on the CPU of our sender, it starts reading only once a
// megabyte has been written (docs/benchmarks-archive.md, seventh and eighth sessions). Each process
// on CPUs of its own removes that, for the engine and its baselines alike: both run between the
// same two processes.
#pragma once

#include "transport/cpu_affinity.hpp"

#include <caf/error.hpp>
#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace crescent::bench {

/// CPU numbers, sorted and unique.
using cpu_list = std::vector<uint32_t>;

using transport::cpu_count_max; // the highest CPU number accepted, plus one

/// Parses a list of CPUs: items "N" or "N-M", separated by commas ("3", "0-3,8"), as taskset -c
/// writes them without strides. Errors say what is wrong; a list is never empty.
caf::expected<cpu_list> parse_cpu_list(std::string_view text);

/// The shortest text parse_cpu_list() reads back as `cpus`: "0-3,8".
std::string to_text(const cpu_list& cpus);

/// A CPU and the core it belongs to: hardware threads of one core share (package, core).
struct cpu_place {
  uint32_t cpu = 0;
  uint32_t package = 0;
  uint32_t core = 0;
};

/// The package of CPUs whose core sysfs does not say: each is then a core of its own (its core
/// number is the CPU's), after those of known packages.
inline constexpr uint32_t unknown_package = UINT32_MAX;

/// Where each of `cpus` sits, from sysfs (topology/physical_package_id and core_id).
std::vector<cpu_place> places_of(const cpu_list& cpus);

/// Where each process runs; an empty list: where the kernel puts it.
struct process_cpus {
  cpu_list client; // the benchmark's own process: its submitters and its engine's threads
  cpu_list peer;   // the transfer peer's process
};

/// `--cpus`, given the CPUs this process may use:
/// - "none": the kernel places both processes;
/// - "auto": whole cores in two halves, in order of package and core (so on a machine of two
///   packages, each process gets one), the first, larger half the client's; with one core, its
///   hardware threads in two halves; with one CPU, none;
/// - "CLIENT:PEER": two CPU lists without a CPU in common, each of CPUs in `allowed`.
caf::expected<process_cpus> choose_cpus(std::string_view spec,
                                        const std::vector<cpu_place>& allowed);

/// The CPUs this thread may run on (sched_getaffinity).
using transport::allowed_cpus;

/// Pins the calling thread, and so every thread it starts afterwards, to `cpus`.
caf::error pin_this_thread(const cpu_list& cpus);

/// choose_cpus() for this process, then pin_this_thread() to the client's CPUs. To be called
/// before any other thread starts: each inherits the CPUs of the thread that starts it.
caf::expected<process_cpus> place_this_process(std::string_view spec);

} // namespace crescent::bench
