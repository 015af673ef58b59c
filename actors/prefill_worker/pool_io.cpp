// The prefill worker and the KV pool: loading the cached prefix before computing, storing the
// prompt's new full blocks after the hand-off. Pool trouble never fails a request: a block that
// cannot be read is recomputed, a block that cannot be stored is simply not cached.
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "actors/store_master/pool_protocol.hpp"
#include "messages/schema/store.capnp.h"
#include "storage/checksum.hpp"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

using pool_protocol::block_location;
using pool_protocol::put_slot;

std::span<std::byte> page_span(prefill_ptr self, size_t i) {
  auto& job = *self->state.current;
  return {job.page_ptrs[i], self->state.parts.engine->config().page_bytes()};
}

void report_corrupt(prefill_ptr self, uint64_t key, uint32_t node) {
  auto msg = pool_protocol::make_report_corrupt(key, node);
  self->request(self->state.parts.dir->store_master, control_timeout, corrupt_atom::value, msg)
      .then([] {}, [](caf::error&) {});
}

// Replicas on this worker's node first: the cheapest path.
std::vector<transport::region_handle> by_locality(std::vector<transport::region_handle> rs,
                                                  uint32_t node) {
  std::stable_partition(rs.begin(), rs.end(),
                        [&](const transport::region_handle& h) { return h.node == node; });
  return rs;
}

// One block into one page: the first replica that reads and verifies.
caf::error load_one(prefill_ptr self, const block_location& loc, std::span<std::byte> page) {
  auto& st = self->state;
  caf::error last = make_error(errc::not_found, "no replica");
  for (const auto& h : by_locality(loc.replicas, st.options.node)) {
    if (h.length != page.size()) {
      last = make_error(errc::invalid_argument, "replica of the wrong size");
      continue;
    }
    if (auto err = st.parts.transfer->read(h, 0, page)) {
      last = std::move(err);
      continue;
    }
    if (storage::block_checksum(page) == loc.checksum)
      return caf::none;
    report_corrupt(self, loc.key, h.node);
    last = make_error(errc::checksum_mismatch, "block " + std::to_string(loc.key));
  }
  return last;
}

// Reads the found blocks into the local pages, in order, stopping at the first that fails.
void load_blocks(prefill_ptr self, const std::vector<block_location>& found) {
  auto& st = self->state;
  auto& job = *st.current;
  const size_t usable = (job.tokens.size() - 1) / st.parts.engine->config().block_tokens;
  for (size_t i = 0; i < found.size() && i < usable; ++i) {
    caf::error err;
    if (found[i].key != job.keys[i] || found[i].replicas.empty())
      err = make_error(errc::not_found, "not in the pool");
    else
      err = load_one(self, found[i], page_span(self, i));
    if (err) {
      if (!is(err, errc::not_found)) {
        spdlog::warn("prefill_worker {}: block {} of request {} is a miss: {}", st.options.instance,
                     i, job.request_id, describe(err));
        ++job.load_misses;
        ++st.load_misses_total;
      }
      break;
    }
    ++job.reused_blocks;
  }
  job.position = job.reused_blocks * st.parts.engine->config().block_tokens;
}

void commit_blocks(prefill_ptr self, std::vector<uint64_t> keys, std::vector<uint64_t> sums,
                   std::vector<uint64_t> revoke);

} // namespace

void lookup_prefix(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  // The last prompt token is always computed: its logits give the first output token.
  const size_t usable = (job.tokens.size() - 1) / st.parts.engine->config().block_tokens;
  if (usable == 0) {
    begin_compute(self);
    return;
  }
  auto msg = pool_protocol::make_get(std::span{job.keys}.first(usable), true);
  self->request(st.parts.dir->store_master, control_timeout, get_atom::value, msg)
      .then(
          [=](const envelope& reply) {
            auto found = pool_protocol::read_get_reply(reply);
            if (found)
              load_blocks(self, *found);
            else
              spdlog::warn("prefill_worker: bad prefix reply: {}", describe(found.error()));
            begin_compute(self);
          },
          [=](caf::error& err) {
            spdlog::warn("prefill_worker: prefix lookup failed, computing all: {}", describe(err));
            begin_compute(self);
          });
}

namespace {

wire::ReplicaPlacement to_wire(placement_policy p) {
  switch (p) {
  case placement_policy::local_first:
    return wire::ReplicaPlacement::LOCAL_FIRST;
  case placement_policy::most_free:
    return wire::ReplicaPlacement::MOST_FREE;
  case placement_policy::random:
    return wire::ReplicaPlacement::RANDOM;
  }
  return wire::ReplicaPlacement::LOCAL_FIRST;
}

// Writes every replica of every granted block; a block with a failed replica is revoked.
void write_replicas(prefill_ptr self, size_t first, const std::vector<put_slot>& slots) {
  auto& cur = *self->state.current;
  std::vector<uint64_t> keys, sums, revoke;
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    if (s.replicas.empty())
      continue;
    auto page = page_span(self, first + i);
    bool ok = s.key == cur.keys[first + i];
    for (const auto& h : s.replicas)
      ok = ok && h.length == page.size() && !self->state.parts.transfer->write(h, 0, page);
    if (!ok) {
      revoke.push_back(s.key);
      continue;
    }
    keys.push_back(s.key);
    sums.push_back(storage::block_checksum(page));
  }
  commit_blocks(self, std::move(keys), std::move(sums), std::move(revoke));
}

} // namespace

void store_new_blocks(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  const auto& model = st.parts.engine->config();
  const size_t first = job.reused_blocks;
  const size_t last = job.tokens.size() / model.block_tokens;
  if (first >= last) {
    finish_job(self, {});
    return;
  }
  const std::vector<uint64_t> sizes(last - first, model.page_bytes());
  std::vector<uint32_t> positions;
  for (size_t i = first; i < last; ++i)
    positions.push_back(static_cast<uint32_t>(i));
  auto msg = pool_protocol::make_put_start(
      {st.options.node, st.options.replicas, to_wire(st.options.placement),
       std::span{job.keys}.subspan(first, last - first), sizes, positions});
  self->request(st.parts.dir->store_master, control_timeout, put_start_atom::value, msg)
      .then(
          [=](const envelope& reply) {
            auto slots = pool_protocol::read_put_start_reply(reply);
            if (!slots || slots->size() != last - first) {
              spdlog::warn("prefill_worker: bad put reply; blocks not stored");
              finish_job(self, {});
              return;
            }
            write_replicas(self, first, *slots);
          },
          [=](caf::error& err) {
            spdlog::warn("prefill_worker: put_start failed: {}", describe(err));
            finish_job(self, {});
          });
}

namespace {

void revoke_blocks(prefill_ptr self, const std::vector<uint64_t>& keys) {
  if (keys.empty())
    return;
  auto msg = pool_protocol::make_put_revoke(keys);
  self->request(self->state.parts.dir->store_master, control_timeout, put_revoke_atom::value, msg)
      .then([] {}, [](caf::error&) {});
}

void commit_blocks(prefill_ptr self, std::vector<uint64_t> keys, std::vector<uint64_t> sums,
                   std::vector<uint64_t> revoke) {
  revoke_blocks(self, revoke);
  if (keys.empty()) {
    finish_job(self, {});
    return;
  }
  auto msg = pool_protocol::make_put_commit(keys, sums);
  self->request(self->state.parts.dir->store_master, control_timeout, put_commit_atom::value, msg)
      .then([=]() { finish_job(self, keys); },
            [=](caf::error& err) {
              spdlog::warn("prefill_worker: commit failed, revoking: {}", describe(err));
              revoke_blocks(self, keys);
              finish_job(self, {});
            });
}

} // namespace

} // namespace crescent
