// Which CPUs the two processes of `crescent bench transfer` run on (`--cpus`), as iperf3's -A
// and netperf's -T pin their two ends.
//
// Why: on the 2-vCPU VMs these figures come from, the kernel does not preempt (PREEMPT_NONE)
// and knows no cache topology, so it wakes a thread on its last CPU even when that CPU is busy
// inside a long system call of another thread; the woken thread waits for the whole call. When
// the peer's server thread lands on the CPU of our sender, it starts reading only once a
// megabyte has been written (docs/benchmarks.md, seventh session). Each process on CPUs of its
// own removes that, for the engine and its baselines alike: both run between the same two
// processes.
#pragma once

#include <caf/expected.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace crescent::bench {

/// CPU numbers, sorted and unique.
using cpu_list = std::vector<uint32_t>;

/// The highest CPU number accepted, plus one (glibc's cpu_set_t).
inline constexpr uint32_t cpu_count_max = 1024;

/// Parses taskset -c's syntax: "3", "0-3,8". Errors name what is wrong; nothing is empty.
caf::expected<cpu_list> parse_cpu_list(std::string_view text);

/// The shortest text parse_cpu_list() reads back as `cpus`: "0-3,8".
std::string to_text(const cpu_list& cpus);

/// Where each process runs; an empty list: where the kernel puts it.
struct process_cpus {
  cpu_list client; // the benchmark's own process: its submitters and its engine's threads
  cpu_list peer;   // the transfer peer's process
};

/// `--cpus`: "none" (the kernel places both), "auto" (the CPUs this process may use split in
/// two halves, the first, larger one the client's; none with fewer than two) or "CLIENT:PEER",
/// two CPU lists, each of CPUs in `allowed`.
caf::expected<process_cpus> choose_cpus(std::string_view spec, const cpu_list& allowed);

/// The CPUs this thread may run on (sched_getaffinity).
caf::expected<cpu_list> allowed_cpus();

/// Pins the calling thread, and so every thread it starts afterwards, to `cpus`.
caf::error pin_this_thread(const cpu_list& cpus);

} // namespace crescent::bench
