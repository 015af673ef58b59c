#include "apps/up/fault_runner.hpp"

#include "apps/up/transfer_faults.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

namespace crescent::up {

fault_runner::fault_runner(const fault_plan& plan, std::vector<node_process>& nodes,
                           const std::string& log_path, netns_network* network,
                           std::vector<message_gate*> gates, restarter restart)
    : faults_(plan.faults), network_(network), gates_(std::move(gates)), nodes_(nodes),
      restart_(std::move(restart)), log_(log_path, std::ios::app) {
  size_t transfer = 0;
  for (size_t i = 0; i < plan.faults.size(); ++i) {
    const auto& f = plan.faults[i];
    if (f.is_transfer_fault()) {
      const auto what = describe(f);
      actions_.push_back({f.at_ms, 0, 0, what, i, false, transfer});
      if (f.for_ms > 0) // else: to the end of the run
        actions_.push_back({f.at_ms + f.for_ms, 0, 0, "end: " + what, i, true, transfer});
      ++transfer;
      continue;
    }
    if (f.is_gate_fault(network_ != nullptr)) {
      // Whole messages, taken by the message gates on the way to and from the node processes.
      const auto what = describe(f) + " [message gates]";
      actions_.push_back({f.at_ms, 0, 0, what, i, false, {}, true});
      if (f.for_ms > 0) // else: to the end of the run
        actions_.push_back({f.at_ms + f.for_ms, 0, 0, "end: " + what, i, true, {}, true});
      continue;
    }
    if (f.kind == fault_kind::partition || f.kind == fault_kind::drop) {
      // Packets, not messages: the kernel drops them in the nodes' namespaces.
      const auto what = describe(f) + " [nftables]";
      actions_.push_back({f.at_ms, 0, 0, what, i, false, {}});
      if (f.for_ms > 0) // else: to the end of the run
        actions_.push_back({f.at_ms + f.for_ms, 0, 0, "end: " + what, i, true, {}});
      continue;
    }
    if (f.kind == fault_kind::kill) {
      actions_.push_back({f.at_ms, SIGKILL, f.node, describe(f), i, false, {}});
      if (f.restart_after_ms > 0)
        actions_.push_back({f.at_ms + f.restart_after_ms,
                            0,
                            f.node,
                            "start node " + std::to_string(f.node) + " again",
                            i,
                            false,
                            {},
                            false,
                            true});
      continue;
    }
    actions_.push_back({f.at_ms, SIGSTOP, f.node, describe(f), i, false, {}});
    actions_.push_back({f.at_ms + f.for_ms,
                        SIGCONT,
                        f.node,
                        "resume node " + std::to_string(f.node),
                        i,
                        true,
                        {}});
  }
  std::stable_sort(actions_.begin(), actions_.end(),
                   [](const action& a, const action& b) { return a.at_ms < b.at_ms; });
}

fault_runner::~fault_runner() {
  stop();
}

void fault_runner::start() {
  const auto now = std::chrono::steady_clock::now();
  thread_ = std::thread([this, now] { run(now); });
}

void fault_runner::stop() {
  {
    std::lock_guard<std::mutex> guard{mutex_};
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable())
    thread_.join();
  end_network_faults();
  end_transfer_faults();
  end_gate_faults();
}

void fault_runner::apply_gate(const action& a, double at_ms) {
  for (auto* g : gates_)
    a.ends ? g->deactivate(a.fault) : g->activate(a.fault);
  const auto when = at_ms < 0 ? std::string{"end of the run"} : fmt::format("{:.1f} ms", at_ms);
  log_ << fmt::format("{}: {} ({} gates)\n", when, a.what, gates_.size()) << std::flush;
  std::lock_guard<std::mutex> guard{mutex_};
  auto& active = gate_active_;
  if (a.ends) {
    active.erase(std::remove(active.begin(), active.end(), a.fault), active.end());
    return;
  }
  active.push_back(a.fault);
  ++injected_;
}

void fault_runner::end_gate_faults() {
  std::vector<size_t> active;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    active.swap(gate_active_);
  }
  for (auto i : active)
    apply_gate({0, 0, 0, "end: " + describe(faults_[i]) + " [message gates]", i, true, {}, true},
               -1);
}

// Every process of the run that still runs, this one included: each has its own engine.
// `at_ms` < 0: the run's end.
void fault_runner::apply_transfer(const action& a, double at_ms) {
  std::vector<pid_t> pids{getpid()};
  for (const auto& x : nodes_)
    if (!x.killed)
      pids.push_back(x.process.pid());
  std::string errors;
  for (auto pid : pids)
    if (auto err = switch_transfer_fault(pid, *a.transfer, !a.ends))
      errors += "; " + crescent::describe(err);
  const auto when = at_ms < 0 ? std::string{"end of the run"} : fmt::format("{:.1f} ms", at_ms);
  log_ << fmt::format("{}: {} [{} processes]{}\n", when, a.what, pids.size(), errors) << std::flush;
  std::lock_guard<std::mutex> guard{mutex_};
  auto& active = transfer_active_;
  if (a.ends) {
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](const action& b) { return b.fault == a.fault; }),
                 active.end());
    return;
  }
  active.push_back(a);
  ++injected_;
}

void fault_runner::end_transfer_faults() {
  std::vector<action> active;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    active.swap(transfer_active_);
  }
  for (auto& a : active) {
    a.ends = true;
    a.what = "end: " + a.what;
    apply_transfer(a, -1);
  }
}

void fault_runner::end_network_faults() {
  std::vector<size_t> active;
  {
    std::lock_guard<std::mutex> guard{mutex_};
    active.swap(network_active_);
  }
  for (auto i : active) {
    auto err = network_->end_fault(i, faults_[i]);
    log_ << fmt::format("end of the run: end: {} [nftables]{}\n", describe(faults_[i]),
                        err ? ": " + crescent::describe(err) : std::string{})
         << std::flush;
  }
}

void fault_runner::apply_network(const action& a, double at_ms) {
  const auto& f = faults_[a.fault];
  caf::error err;
  if (network_ == nullptr)
    err = make_error(errc::bad_config, "no network namespaces (crescent up --netns)");
  else if (a.ends)
    err = network_->end_fault(a.fault, f);
  else
    err = network_->start_fault(a.fault, f);
  log_ << fmt::format("{:.1f} ms: {}{}\n", at_ms, a.what, err ? ": " + crescent::describe(err) : "")
       << std::flush;
  std::lock_guard<std::mutex> guard{mutex_};
  auto& active = network_active_;
  if (a.ends)
    active.erase(std::remove(active.begin(), active.end(), a.fault), active.end());
  else if (!err) {
    active.push_back(a.fault);
    ++injected_;
  }
}

size_t fault_runner::injected() const {
  std::lock_guard<std::mutex> guard{mutex_};
  return injected_;
}

void fault_runner::run(std::chrono::steady_clock::time_point start) {
  for (const auto& a : actions_) {
    std::unique_lock<std::mutex> lock{mutex_};
    if (wake_.wait_until(lock, start + std::chrono::milliseconds(a.at_ms),
                         [this] { return stopping_; }))
      return;
    lock.unlock();
    apply(a, start);
  }
}

// A new process where the killed one was: it is the node's from now on (its pid, its log).
void fault_runner::apply_restart(const action& a, double at_ms) {
  auto x = std::find_if(nodes_.begin(), nodes_.end(),
                        [&](const node_process& p) { return p.node == a.node; });
  if (x == nodes_.end() || !x->killed || !restart_) {
    log_ << fmt::format("{:.1f} ms: {}: skipped, the node's process was not killed\n", at_ms,
                        a.what);
    return;
  }
  auto fresh = restart_(a.node);
  if (!fresh) {
    log_ << fmt::format("{:.1f} ms: {}: {}\n", at_ms, a.what, crescent::describe(fresh.error()))
         << std::flush;
    return;
  }
  if (x->output) {
    x->output->join(); // the killed process's output is closed
    x->output.reset();
  }
  *x = std::move(*fresh);
  copy_node_output(*x);
  log_ << fmt::format("{:.1f} ms: {} (pid {}, log {})\n", at_ms, a.what, x->process.pid(),
                      x->log_path)
       << std::flush;
}

void fault_runner::apply(const action& a, std::chrono::steady_clock::time_point start) {
  const double at_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (a.restart)
    return apply_restart(a, at_ms);
  if (a.gate)
    return apply_gate(a, at_ms);
  if (a.transfer)
    return apply_transfer(a, at_ms);
  if (a.signal == 0)
    return apply_network(a, at_ms);
  auto x = std::find_if(nodes_.begin(), nodes_.end(),
                        [&](const node_process& p) { return p.node == a.node; });
  if (x == nodes_.end() || x->killed) {
    log_ << fmt::format("{:.1f} ms: {}: skipped, the node's process is gone\n", at_ms, a.what);
    return;
  }
  const auto pid = x->process.pid();
  const bool sent = x->process.signal(a.signal);
  if (sent && a.signal == SIGKILL)
    x->killed = true;
  if (sent && (a.signal == SIGSTOP || a.signal == SIGCONT))
    x->paused = a.signal == SIGSTOP;
  log_ << fmt::format("{:.1f} ms: {} (pid {}){}\n", at_ms, a.what, pid,
                      sent ? "" : ": the signal could not be sent")
       << std::flush;
  if (sent && a.signal != SIGCONT) {
    std::lock_guard<std::mutex> guard{mutex_};
    ++injected_;
  }
}

} // namespace crescent::up
