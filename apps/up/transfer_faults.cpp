#include "apps/up/transfer_faults.hpp"

#include "gpu/reference_math.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace crescent::up {

namespace {

// What the signal handler touches: lock-free atomics only (async-signal-safe).
std::atomic<uint64_t> switched_on{0}; // bit k: fault k is on
std::atomic<uint64_t> draws{0};
std::atomic<uint64_t> failed{0};
std::atomic<uint64_t> corrupted{0};
std::atomic<uint64_t> delayed{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);

int switch_signal() {
  return SIGRTMIN + 1;
}

// sigqueue's value: the ordinal, shifted past the on/off bit.
void on_switch(int, siginfo_t* info, void*) {
  const auto value = static_cast<uint64_t>(info->si_value.sival_int);
  const uint64_t ordinal = value >> 1;
  if (ordinal >= transfer_faults_max)
    return; // not ours to act on: a stray sender
  const uint64_t bit = uint64_t{1} << ordinal;
  if (value & 1)
    switched_on.fetch_or(bit);
  else
    switched_on.fetch_and(~bit);
}

// One splitmix64 step from `x`: a counter's draw, the same from any thread.
uint64_t mix(uint64_t x) {
  return gpu::ref::splitmix64(x);
}

struct hook_state {
  std::vector<transfer_fault_spec> faults;
  uint64_t stream = 0; // of the seed and the node
};

transport::slice_verdict judge(const hook_state& st, const transport::slice_view& v) {
  const uint64_t on = switched_on.load(std::memory_order_relaxed);
  if (on == 0)
    return transport::slice_fault::none;
  for (size_t k = 0; k < st.faults.size(); ++k) {
    const auto& f = st.faults[k];
    if (!(on & (uint64_t{1} << k)) || (f.node && *f.node != v.remote_node))
      continue;
    const uint64_t x = mix(st.stream ^ mix(draws.fetch_add(1)));
    if (static_cast<double>(x >> 11) * 0x1.0p-53 >= f.probability)
      continue;
    const auto verdict = slice_verdict_of(f.kind, f.delay_ms);
    (verdict.fault == transport::slice_fault::corrupt ? corrupted
     : verdict.fault == transport::slice_fault::delay ? delayed
                                                      : failed)
        .fetch_add(1);
    return verdict;
  }
  return transport::slice_fault::none;
}

caf::error bad(size_t entry, const std::string& text, const std::string& what) {
  return make_error(errc::bad_config,
                    fmt::format("--transfer-faults: entry {} ('{}'): {}", entry + 1, text, what));
}

// Splits "a:b:c" at its colons.
std::vector<std::string> fields_of(const std::string& text) {
  std::vector<std::string> out;
  size_t at = 0;
  for (size_t colon; (colon = text.find(':', at)) != std::string::npos; at = colon + 1)
    out.push_back(text.substr(at, colon - at));
  out.push_back(text.substr(at));
  return out;
}

caf::expected<transfer_fault_spec> parse_entry(size_t entry, const std::string& text) {
  const auto fields = fields_of(text);
  if (fields.size() < 3)
    return bad(entry, text, "expected KIND:PROBABILITY:NODE (NODE a number or 'any')");
  transfer_fault_spec f;
  const auto kinds = {fault_kind::fail_transfer, fault_kind::corrupt, fault_kind::delay_transfer};
  const auto kind = std::find_if(kinds.begin(), kinds.end(),
                                 [&](fault_kind k) { return fields[0] == kind_name(k); });
  if (kind == kinds.end())
    return bad(entry, text, "the kind is fail_transfer, corrupt or delay_transfer");
  f.kind = *kind;
  const size_t want = f.kind == fault_kind::delay_transfer ? 4 : 3;
  if (fields.size() != want)
    return bad(entry, text,
               want == 4 ? "expected delay_transfer:PROBABILITY:NODE:DELAY_MS (NODE a number or "
                           "'any')"
                         : "expected KIND:PROBABILITY:NODE (NODE a number or 'any')");
  const auto& probability = fields[1];
  char* end = nullptr;
  errno = 0;
  f.probability = std::strtod(probability.c_str(), &end);
  if (probability.empty() || *end != '\0' || errno != 0 || !(f.probability > 0) ||
      f.probability > 1)
    return bad(entry, text, "the probability is a number in (0, 1]");
  auto read_uint = [&](const std::string& field, uint64_t max, uint64_t& out) {
    errno = 0;
    const unsigned long long n = std::strtoull(field.c_str(), &end, 10);
    if (field.empty() || field[0] == '-' || *end != '\0' || errno != 0 || n > max)
      return false;
    out = n;
    return true;
  };
  if (fields[2] != "any") {
    uint64_t n = 0;
    if (!read_uint(fields[2], cluster_nodes_max - 1, n))
      return bad(entry, text,
                 fmt::format("the node is 'any' or a number below {}", cluster_nodes_max));
    f.node = static_cast<uint32_t>(n);
  }
  if (want == 4 && (!read_uint(fields[3], fault_delay_ms_max, f.delay_ms) || f.delay_ms == 0))
    return bad(entry, text,
               fmt::format("the delay is a number of ms in [1, {}]", fault_delay_ms_max));
  return f;
}

} // namespace

std::vector<transfer_fault_spec> transfer_faults_of(const fault_plan& plan) {
  std::vector<transfer_fault_spec> out;
  for (const auto& f : plan.faults)
    if (f.is_transfer_fault())
      out.push_back({f.kind, f.probability,
                     f.match.node ? std::optional<uint32_t>{uint32_t(*f.match.node)} : std::nullopt,
                     f.kind == fault_kind::delay_transfer ? f.delay_ms : 0});
  return out;
}

std::string format_transfer_faults(const std::vector<transfer_fault_spec>& faults) {
  std::string out;
  for (const auto& f : faults)
    out += fmt::format("{}{}:{}:{}{}", out.empty() ? "" : ",", kind_name(f.kind), f.probability,
                       f.node ? std::to_string(*f.node) : std::string{"any"},
                       f.kind == fault_kind::delay_transfer ? fmt::format(":{}", f.delay_ms)
                                                            : std::string{});
  return out;
}

caf::expected<std::vector<transfer_fault_spec>> parse_transfer_faults(const std::string& text) {
  std::vector<transfer_fault_spec> out;
  size_t at = 0;
  while (at <= text.size()) {
    const auto comma = std::min(text.find(',', at), text.size());
    if (out.size() == transfer_faults_max)
      return make_error(errc::bad_config,
                        fmt::format("--transfer-faults: more than {} faults", transfer_faults_max));
    auto f = parse_entry(out.size(), text.substr(at, comma - at));
    if (!f)
      return std::move(f.error());
    out.push_back(*f);
    at = comma + 1;
  }
  return out;
}

caf::error install_transfer_faults(transport::transfer_engine& engine,
                                   std::vector<transfer_fault_spec> faults, uint64_t seed,
                                   uint32_t node) {
  if (faults.size() > transfer_faults_max)
    return make_error(errc::bad_config, fmt::format("{} transfer faults: at most {}", faults.size(),
                                                    transfer_faults_max));
  switched_on = 0;
  draws = 0;
  failed = 0;
  corrupted = 0;
  delayed = 0;
  struct sigaction action {};
  action.sa_sigaction = on_switch;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(switch_signal(), &action, nullptr) != 0)
    return make_error(errc::io_error,
                      std::string{"the transfer faults' signal handler: "} + std::strerror(errno));
  auto st = std::make_shared<hook_state>();
  st->faults = std::move(faults);
  st->stream = mix(seed) ^ mix(0x5eed0000ull + node);
  engine.set_fault_hook([st](const transport::slice_view& v) { return judge(*st, v); });
  return caf::none;
}

caf::error switch_transfer_fault(pid_t pid, size_t ordinal, bool on) {
  assert(ordinal < transfer_faults_max);
  sigval value{};
  value.sival_int = static_cast<int>(ordinal << 1 | (on ? 1 : 0));
  if (sigqueue(pid, switch_signal(), value) != 0)
    return make_error(errc::unavailable,
                      fmt::format("switching transfer fault {} {} in process "
                                  "{}: {}",
                                  ordinal, on ? "on" : "off", pid, std::strerror(errno)));
  return caf::none;
}

transfer_faults_taken transfer_faults_taken_here() {
  return {failed.load(), corrupted.load(), delayed.load()};
}

} // namespace crescent::up
