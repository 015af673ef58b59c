// Batches: validation, slicing, the end of slices, operations and batches, deadlines.
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"

#include <algorithm>
#include <cassert>

namespace crescent::transport {

namespace {

// Checks an operation on its own; a failed check ends the operation before any byte moves.
caf::error check_op(const transfer_op& op) {
  if (op.local.data() == nullptr && !op.local.empty())
    return make_error(errc::invalid_argument, "null local buffer");
  if (op.local.size() > op_bytes_max)
    return make_error(errc::limit_exceeded, "operation above 64 GiB");
  if (op.remote_offset > op.remote.length || op.local.size() > op.remote.length - op.remote_offset)
    return make_error(errc::out_of_range, "bytes [" + std::to_string(op.remote_offset) + ", +" +
                                              std::to_string(op.local.size()) + ") lie outside " +
                                              to_string(op.remote));
  if (op.local_location.is_gpu() && op.checksum)
    return make_error(errc::invalid_argument,
                      "checksums are not supported on GPU memory: there is no host copy to hash");
  return caf::none;
}

// Why an operation has no path: with a GPU buffer, no path to its node carries GPU memory.
caf::error no_path(const transfer_engine::impl& e, const transfer_op& op) {
  if (!op.local_location.is_gpu())
    return make_error(errc::not_found, "no route to node " + std::to_string(op.remote.node));
  std::string why = "the local buffer is GPU memory (" + to_string(op.local_location) +
                    ") and no path to node " + std::to_string(op.remote.node) + " carries it";
  if (e.cuda_status)
    why += ": " + describe(e.cuda_status);
  return make_error(errc::unavailable, std::move(why));
}

void finish_batch(batch_state& b) {
  auto* engine = b.engine;
  if (b.callback) {
    std::vector<op_result> results;
    for (auto& op : b.ops)
      results.push_back(op->result);
    auto callback = std::move(b.callback);
    {
      std::lock_guard guard{engine->batches_mutex};
      engine->batches.erase(b.id); // may destroy b: nothing below touches it
    }
    callback(std::move(results));
    return;
  }
  std::lock_guard guard{b.mutex};
  b.done = true;
  b.done_cv.notify_all();
}

void finish_op(batch_state& b, op_record& op) {
  {
    std::lock_guard guard{op.mutex};
    if (op.failure) {
      op.result = {op_state::failed, op.failure};
    } else if (op.timed_out) {
      op.result = {op_state::timed_out, deadline_passed()};
    } else if (op.cancelled) {
      op.result = {op_state::cancelled, make_error(errc::cancelled, "cancelled")};
    } else if (op.modeled_late || op.modeled_ns + op.fault_delay_ns > b.budget_ns) {
      // Modeled time: the bytes moved at once, but the modeled transfer (or its injected delay)
      // would still be going at the deadline, where a real one is cut off.
      op.result = {op_state::timed_out,
                   make_error(errc::timeout, "the modeled transfer ends after the batch's "
                                             "deadline")};
    } else {
      op.result = {op_state::completed, {}};
    }
    op.result.modeled_ns = std::min(op.modeled_ns + op.fault_delay_ns, b.budget_ns);
  }
  if (b.ops_left.fetch_sub(1) == 1)
    finish_batch(b);
}

// Ends one slice for good, folding its outcome into its operation.
void end_slice(slice_record& s, caf::error err) {
  assert(!s.ended && "a slice ended twice");
  s.ended = true;
  auto& b = *s.batch;
  auto& op = *b.ops[s.op];
  if (err) {
    std::lock_guard guard{op.mutex};
    if (is(err, errc::timeout))
      op.timed_out = true;
    else if (is(err, errc::cancelled))
      op.cancelled = true;
    else if (!op.failure)
      op.failure = std::move(err);
  }
  if (op.slices_left.fetch_sub(1) == 1)
    finish_op(b, op);
}

void start_slice(slice_record& s) {
  auto& b = *s.batch;
  auto& op = *b.ops[s.op];
  if (b.expired.load() || clock_type::now() >= b.deadline)
    return end_slice(s, make_error(errc::timeout, "deadline passed before the slice started"));
  if (b.cancelled.load())
    return end_slice(s, make_error(errc::cancelled, "cancelled before the slice started"));
  bool failed = false;
  {
    std::lock_guard guard{op.mutex};
    failed = static_cast<bool>(op.failure);
  }
  if (failed)
    return end_slice(s, caf::none); // its operation already failed: do not move more bytes
  op.paths[s.path]->start(s);
}

} // namespace

bool retryable(const caf::error& err) {
  return is(err, errc::io_error) || is(err, errc::unavailable) || is(err, errc::checksum_mismatch);
}

bool injected_failure(slice_record& s) {
  if (s.released) { // back from the delay line: this attempt was judged before it waited
    s.released = false;
    return false;
  }
  auto& e = *s.batch->engine;
  const auto verdict =
      e.fault_hook ? e.fault_hook({s.kind, s.remote.node, s.length}) : slice_verdict{};
  s.fault = verdict.fault;
  if (s.fault == slice_fault::fail) {
    complete_slice(s, make_error(errc::io_error, "the slice failed (injected fault)"));
    return true;
  }
  if (s.fault != slice_fault::delay)
    return false;
  s.fault = slice_fault::none; // nothing else happens to its bytes
  const auto delay = std::clamp<std::chrono::nanoseconds>(verdict.delay, {}, slice_delay_max);
  if (e.links || e.fault_delay_mode == fault_delays::modeled) {
    auto& op = *s.batch->ops[s.op];
    std::lock_guard guard{op.mutex};
    op.fault_delay_ns = std::max<uint64_t>(op.fault_delay_ns, delay.count());
    return false;
  }
  return e.hold(s, clock_type::now() + delay);
}

void complete_slice(slice_record& s, caf::error err) {
  auto& b = *s.batch;
  auto& op = *b.ops[s.op];
  auto& counters = *op.counters[s.path];
  if (!err) {
    ++counters.slices;
    (s.kind == op_kind::read ? counters.bytes_read : counters.bytes_written) += s.length;
    return end_slice(s, caf::none);
  }
  const bool more = ++s.attempts < b.engine->options.slice_attempts_max && !b.expired.load() &&
                    !b.cancelled.load() && clock_type::now() < b.deadline;
  if (retryable(err) && more) {
    ++counters.retries;
    // A path that is unavailable gives way to the next; a lost connection is retried on the
    // same path, which picks another connection.
    if (is(err, errc::unavailable) && s.path + 1 < op.paths.size()) {
      if (s.given_way.empty())
        s.given_way = std::string{op.paths[s.path]->name()} + ": " + describe(err);
      ++s.path;
    }
    return start_slice(s);
  }
  // A slice the watchdog cut off (its connection shut down at the deadline) would otherwise
  // have been retried: the deadline ended it, and the operation says so.
  if (retryable(err) && b.expired.load())
    err = make_error(errc::timeout, "the batch's deadline passed (" + describe(err) + ")");
  if (!is(err, errc::timeout) && !is(err, errc::cancelled)) {
    ++counters.failures;
    if (!s.given_way.empty() && err.category() == error_category)
      err = make_error(static_cast<errc>(err.code()), std::string{op.paths[s.path]->name()} + ": " +
                                                          describe(err) + "; before it, " +
                                                          s.given_way);
  }
  end_slice(s, std::move(err));
}

namespace {

uint64_t slice_size(const transfer_engine::impl& e, const std::vector<backend*>& paths) {
  if (paths.empty())
    return e.options.slice_bytes;
  if (paths[0] == e.tcp.get())
    return e.options.tcp_slice_bytes;
  if (paths[0] == e.shm.get() || paths[0] == e.local.get() || paths[0] == e.cuda.get())
    return e.options.copy_slice_bytes;
  return e.options.slice_bytes;
}

// The paths that can carry this operation, in preference order. The last one always stays,
// so that an operation no path can carry fails with that path's reason; but a GPU buffer only
// ever goes to paths that carry device memory (none: the operation fails in launch).
std::vector<backend*> usable_paths(std::vector<backend*> all, const transfer_op& op) {
  if (op.local_location.is_gpu())
    std::erase_if(all, [](backend* b) { return !b->carries_device_memory(); });
  std::vector<backend*> out;
  for (size_t i = 0; i < all.size(); ++i)
    if (i + 1 == all.size() ? out.empty() || all[i]->can_carry(op) : all[i]->can_carry(op))
      out.push_back(all[i]);
  return out;
}

// Simulated time: the operation's time on the modeled links, from the node of its local buffer
// (a registered region of this engine; unregistered memory counts as the remote node's own) to
// the remote node, or back for a read.
uint64_t modeled_duration(transfer_engine::impl& e, const transfer_op& op) {
  uint32_t local_node = op.remote.node;
  if (auto h = e.table->pin_address(op.local.data(), op.local.size())) {
    local_node = h->node;
    e.table->unpin(*h);
  }
  const bool read = op.kind == op_kind::read;
  return e.links->reserve(read ? op.remote.node : local_node, read ? local_node : op.remote.node,
                          op.local.size());
}

std::shared_ptr<batch_state> build_batch(transfer_engine::impl& e, std::span<const transfer_op> ops,
                                         clock_type::time_point deadline) {
  auto b = std::make_shared<batch_state>();
  b->engine = &e;
  b->deadline = deadline;
  const auto budget =
      std::chrono::duration_cast<std::chrono::nanoseconds>(deadline - clock_type::now());
  b->budget_ns = budget.count() < 0 ? 0 : static_cast<uint64_t>(budget.count());
  b->ops_left = ops.size();
  std::vector<std::vector<backend*>> paths;
  std::unordered_map<uint32_t, std::vector<backend*>> seen; // routes are looked up per node
  size_t slice_count = 0;
  for (const auto& op : ops) {
    auto i = seen.find(op.remote.node);
    if (i == seen.end())
      i = seen.emplace(op.remote.node, e.paths_to(op.remote.node)).first;
    paths.push_back(usable_paths(i->second, op));
    const uint64_t size = slice_size(e, paths.back());
    slice_count += (op.local.size() + size - 1) / size;
  }
  b->slices.reserve(slice_count); // never reallocated: backends hold references
  for (uint32_t i = 0; i < ops.size(); ++i) {
    auto rec = std::make_unique<op_record>();
    rec->op = ops[i];
    rec->paths = std::move(paths[i]);
    for (auto* p : rec->paths)
      rec->counters.push_back(&e.counters_for(p->name(), ops[i].remote.node));
    const uint64_t n = ops[i].local.size();
    const uint64_t size = slice_size(e, rec->paths);
    uint32_t slices = 0;
    for (uint64_t off = 0; off < n; off += size, ++slices)
      b->slices.push_back(slice_record{
          b.get(), i, ops[i].kind, ops[i].local.data() + off, std::min<uint64_t>(size, n - off),
          ops[i].remote, ops[i].remote_offset + off, ops[i].checksum, ops[i].local_location});
    if (slices == 1 && ops[i].kind == op_kind::write && ops[i].checksum)
      b->slices.back().known_checksum = ops[i].local_checksum;
    rec->slices_left = slices;
    if (e.links) {
      rec->modeled_ns = modeled_duration(e, ops[i]);
      if (budget.count() < 0 || rec->modeled_ns > b->budget_ns) {
        rec->modeled_late = true;
        rec->modeled_ns = b->budget_ns;
      }
    }
    b->ops.push_back(std::move(rec));
  }
  return b;
}

// Ends operations that cannot start (bad shape, no route, nothing to move) and starts the rest.
void launch(transfer_engine::impl& e, batch_state& b) {
  std::vector<bool> startable(b.ops.size());
  for (uint32_t i = 0; i < b.ops.size(); ++i) {
    auto& op = *b.ops[i];
    caf::error err = check_op(op.op);
    if (!err && op.paths.empty())
      err = no_path(e, op.op);
    if (!err)
      ++op.counters[0]->operations;
    if (err || op.slices_left == 0) {
      if (err)
        ++(op.counters.empty() ? e.counters_for("none", op.op.remote.node) : *op.counters[0])
              .failures;
      {
        std::lock_guard guard{op.mutex};
        op.failure = std::move(err);
      }
      finish_op(b, op);
      continue;
    }
    startable[i] = true;
  }
  // Slices of ended operations are skipped. The caller holds the batch alive throughout.
  b.launching = true;
  for (auto& s : b.slices)
    if (startable[s.op])
      start_slice(s);
  b.launching = false;
  // Every path, as the watchdog expires batches: a slice may have fallen to another path during
  // launch, and once started it belongs to whichever thread ends it (it is not read here again).
  for (auto* path : e.paths())
    path->flush(b);
}

} // namespace

namespace {

caf::error enroll(transfer_engine::impl& e, const std::shared_ptr<batch_state>& b) {
  std::lock_guard guard{e.batches_mutex};
  if (e.batches.size() >= batches_max)
    return make_error(errc::limit_exceeded,
                      "65536 batches are outstanding: wait for (or forget) finished ones");
  b->id = e.next_batch++;
  e.batches.emplace(b->id, b);
  return caf::none;
}

} // namespace

caf::expected<batch_id> transfer_engine::submit(std::span<const transfer_op> ops,
                                                clock_type::time_point deadline) {
  if (ops.size() > batch_ops_max)
    return make_error(errc::limit_exceeded, "a batch holds at most 65536 operations");
  auto b = build_batch(*impl_, ops, deadline);
  if (auto err = enroll(*impl_, b))
    return err;
  impl_->watch(b);
  if (ops.empty())
    finish_batch(*b);
  else
    launch(*impl_, *b);
  return b->id;
}

caf::error transfer_engine::submit(std::span<const transfer_op> ops,
                                   clock_type::time_point deadline, batch_callback done) {
  if (ops.size() > batch_ops_max)
    return make_error(errc::limit_exceeded, "a batch holds at most 65536 operations");
  auto b = build_batch(*impl_, ops, deadline);
  b->callback = std::move(done);
  if (auto err = enroll(*impl_, b))
    return err;
  impl_->watch(b);
  if (ops.empty())
    finish_batch(*b);
  else
    launch(*impl_, *b);
  return caf::none;
}

caf::expected<std::vector<op_result>> transfer_engine::poll(batch_id id) const {
  std::shared_ptr<batch_state> b;
  {
    std::lock_guard guard{impl_->batches_mutex};
    auto i = impl_->batches.find(id);
    if (i == impl_->batches.end() || i->second->callback)
      return make_error(errc::not_found, "no batch " + std::to_string(id));
    b = i->second;
  }
  std::vector<op_result> out;
  for (auto& op : b->ops) {
    std::lock_guard guard{op->mutex};
    out.push_back(op->result);
  }
  return out;
}

caf::expected<std::vector<op_result>> transfer_engine::wait(batch_id id) {
  std::shared_ptr<batch_state> b;
  {
    std::lock_guard guard{impl_->batches_mutex};
    auto i = impl_->batches.find(id);
    if (i == impl_->batches.end() || i->second->callback)
      return make_error(errc::not_found, "no batch " + std::to_string(id));
    b = i->second;
  }
  {
    std::unique_lock guard{b->mutex};
    b->done_cv.wait(guard, [&] { return b->done; });
  }
  {
    std::lock_guard guard{impl_->batches_mutex};
    impl_->batches.erase(id);
  }
  std::vector<op_result> out;
  for (auto& op : b->ops)
    out.push_back(op->result);
  return out;
}

void transfer_engine::cancel(batch_id id) {
  std::shared_ptr<batch_state> b;
  {
    std::lock_guard guard{impl_->batches_mutex};
    if (auto i = impl_->batches.find(id); i != impl_->batches.end())
      b = i->second;
  }
  if (!b)
    return;
  b->cancelled = true;
  impl_->let_go(*b);
}

// -- deadlines ---------------------------------------------------------------------------------

void transfer_engine::impl::watch(const std::shared_ptr<batch_state>& b) {
  bool earliest = false;
  {
    std::lock_guard guard{watchdog_mutex};
    earliest = deadlines.empty() || b->deadline < deadlines.begin()->first;
    deadlines.emplace(b->deadline, b);
  }
  // Waking the watchdog costs a context switch; it only needs to know of an earlier deadline.
  if (earliest)
    watchdog_cv.notify_all();
}

// -- the delay line (injected delays, fault_delays::held) --------------------------------------

bool transfer_engine::impl::hold(slice_record& s, clock_type::time_point due) {
  bool earliest = false;
  {
    std::lock_guard guard{watchdog_mutex};
    if (held.size() >= held_slices_max || stopping)
      return false;
    earliest = held.empty() || due < held.begin()->first;
    held.emplace(due, &s);
  }
  if (earliest)
    watchdog_cv.notify_all();
  return true;
}

void transfer_engine::impl::let_go(const batch_state& b) {
  bool any = false;
  {
    std::lock_guard guard{watchdog_mutex};
    for (auto i = held.begin(); i != held.end();) {
      if (i->second->batch != &b || i->first == clock_type::time_point::min()) {
        ++i;
        continue;
      }
      held.emplace(clock_type::time_point::min(), i->second);
      i = held.erase(i);
      any = true;
    }
  }
  if (any)
    watchdog_cv.notify_all();
}

void transfer_engine::impl::end_held() {
  std::multimap<clock_type::time_point, slice_record*> left;
  {
    std::lock_guard guard{watchdog_mutex};
    left.swap(held);
  }
  for (auto& [due, s] : left)
    complete_slice(*s, make_error(errc::cancelled, "the engine stopped while the slice was held "
                                                   "by an injected delay"));
}

void transfer_engine::impl::run_watchdog() {
  std::unique_lock guard{watchdog_mutex};
  while (!stopping) {
    if (!held.empty() && clock_type::now() >= held.begin()->first) {
      auto* s = held.begin()->second;
      held.erase(held.begin());
      guard.unlock();
      s->released = true; // start_slice ends it at once if its batch expired or was cancelled
      start_slice(*s);
      guard.lock();
      continue;
    }
    if (deadlines.empty()) {
      if (held.empty())
        watchdog_cv.wait(guard);
      else
        watchdog_cv.wait_until(guard, held.begin()->first);
      continue;
    }
    auto first = deadlines.begin();
    if (clock_type::now() < first->first) {
      auto until = first->first;
      if (!held.empty())
        until = std::min(until, held.begin()->first);
      watchdog_cv.wait_until(guard, until);
      continue;
    }
    auto b = first->second.lock();
    deadlines.erase(first);
    if (!b)
      continue; // ended and forgotten
    {
      std::lock_guard done_guard{b->mutex};
      if (b->done)
        continue;
    }
    b->expired = true;
    guard.unlock();
    for (auto* path : paths())
      path->expire(*b);
    let_go(*b);
    guard.lock();
  }
}

} // namespace crescent::transport
