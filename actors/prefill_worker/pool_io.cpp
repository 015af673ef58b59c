// The prefill worker and the KV pool: loading the cached prefix before computing (the current
// job), storing the prompt's new blocks after the hand-off (the storing job, while the next one
// loads and computes). Pool trouble never fails a request: a block that
// cannot be read is recomputed, a block that cannot be stored is simply not cached. Blocks read
// from another node are then copied to this node's pool (end_store), best effort too.
//
// Both directions are batches through the transfer engine whose end comes back as a message
// (loaded_atom, stored_atom), so the worker serves its mailbox while bytes move, and in
// simulated time the batch takes its modeled time (actors/common/modeled_delay.hpp).
#include "actors/common/modeled_delay.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "actors/store_master/pool_protocol.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/actor_cast.hpp>
#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

#include <cassert>
#include <cstring>
#include <numeric>
#include <utility>

namespace crescent {

namespace {

using pool_protocol::block_location;
using pool_protocol::put_slot;

std::span<std::byte> page_span(prefill_ptr self, const prefill_job& job, size_t i) {
  return {job.page_ptrs[i], self->state.parts.engine->page_memory_bytes()};
}

// Block i of a job's prompt as the codec sees it (its keys: one per page, the last may be
// partial).
page_extent extent(prefill_ptr self, const prefill_job& job, size_t i) {
  return extent_of(static_cast<uint32_t>(i), static_cast<uint32_t>(job.tokens.size()),
                   self->state.parts.engine->config().block_tokens);
}

// The bytes block i takes in the pool: its page, or what the codec encodes it to.
uint64_t stored_bytes(prefill_ptr self, const prefill_job& job, size_t i) {
  const auto& codec = self->state.parts.codec;
  if (!codec)
    return self->state.parts.engine->page_memory_bytes();
  const auto e = extent(self, job, i);
  return codec->block_bytes(static_cast<uint32_t>(i), e.tokens, e.last);
}

std::span<std::byte> codec_scratch(prefill_ptr self) {
  auto& scratch = self->state.codec_scratch;
  scratch.resize(self->state.parts.engine->page_memory_bytes());
  return scratch;
}

// Encodes page i of the storing job into the front of its own memory (the page is not read
// again: the decode worker has its KV), so the write needs no other registered memory.
caf::error encode_in_place(prefill_ptr self, const prefill_job& job, size_t i, size_t bytes) {
  auto page = page_span(self, job, i);
  auto out = codec_scratch(self);
  const auto e = extent(self, job, i);
  auto n = self->state.parts.codec->encode(page, static_cast<uint32_t>(i), e.tokens, e.last, out);
  if (!n)
    return std::move(n.error());
  if (*n != bytes)
    return make_error(errc::internal, "the codec wrote another size than it said");
  std::memcpy(page.data(), out.data(), bytes);
  return {};
}

// Decodes the block read into the front of page i back into the whole page.
caf::error decode_in_place(prefill_ptr self, const prefill_job& job, size_t i, size_t bytes) {
  auto page = page_span(self, job, i);
  auto in = codec_scratch(self).first(bytes);
  std::memcpy(in.data(), page.data(), bytes);
  return self->state.parts.codec->decode(in, static_cast<uint32_t>(i), page);
}

// The job a phase works on: the current one loads and computes; the storing one stores.
using job_slot = std::optional<prefill_job> prefill_state::*;
constexpr job_slot computing = &prefill_state::current;
constexpr job_slot storing = &prefill_state::storing;

bool is_job(prefill_ptr self, job_slot slot, uint64_t request_id) {
  const auto& job = self->state.*slot;
  return job && job->request_id == request_id;
}

uint32_t block_tokens(prefill_ptr self) {
  return self->state.parts.engine->config().block_tokens;
}

void report_corrupt(prefill_ptr self, block_key key, uint32_t node) {
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

// The modeled time of the batch's reads from other nodes (0 on every real engine, or with none).
uint64_t remote_end_ns(const std::vector<transport::transfer_op>& ops,
                       std::span<const transport::op_result> results, uint32_t node) {
  uint64_t end = 0;
  for (size_t i = 0; i < ops.size() && i < results.size(); ++i)
    if (ops[i].remote.node != node)
      end = std::max(end, results[i].modeled_ns);
  return end;
}

// Submits `ops` for job `id`; their end comes back to this worker as `Atom`, after the
// batch's modeled time in simulated time (a load's with the modeled time of its reads from
// other nodes, what the conductor learns bandwidth from). A batch that cannot start ends at
// once, failed.
// `batch` numbers a load's batches within its round.
template <class Atom>
void submit_batch(prefill_ptr self, uint64_t id, const std::vector<transport::transfer_op>& ops,
                  Atom atom, uint32_t batch = 0) {
  auto& st = self->state;
  auto me = caf::actor_cast<caf::actor_addr>(self); // weak: see send_at_batch_end
  // The pages are read or written until the batch ends, which may be after this worker exits:
  // the callback keeps their memory mapped until then (see handoff.cpp).
  auto err = st.parts.transfer->submit(
      ops, transport::clock_type::now() + pool_io_timeout,
      [me, id, atom, ops, batch, node = st.options.node,
       pages = st.parts.kv_pages->memory_keepalive()](std::vector<transport::op_result> results) {
        if constexpr (std::is_same_v<Atom, loaded_atom>)
          send_at_batch_end<prefill_worker_actor>(me, batch_end_ns(results), atom, id, batch,
                                                  pool_batches::errors_of(results),
                                                  remote_end_ns(ops, results, node));
        else
          send_at_batch_end<prefill_worker_actor>(me, batch_end_ns(results), atom, id,
                                                  pool_batches::errors_of(results));
      });
  if (!err)
    return;
  if constexpr (std::is_same_v<Atom, loaded_atom>)
    self->send(caf::actor_cast<prefill_worker_actor>(self), atom, id, batch,
               std::vector<caf::error>(ops.size(), err), uint64_t{0});
  else
    self->send(caf::actor_cast<prefill_worker_actor>(self), atom, id,
               std::vector<caf::error>(ops.size(), err));
}

// Asks the store master; its answer continues the job only while that job is still in its slot
// (a job that failed or timed out meanwhile is gone). `Reply` is the schema of its answer.
template <class Reply, class Atom, class Schema, class OnReply, class OnError>
void ask_master(prefill_ptr self, job_slot slot, Atom atom, typed_envelope<Schema> msg,
                OnReply on_reply, OnError on_error) {
  const auto id = (self->state.*slot)->request_id;
  auto current = [self, slot, id] { return is_job(self, slot, id); };
  self->request(self->state.parts.dir->store_master, control_timeout, atom, std::move(msg))
      .then(
          [=](const typed_envelope<Reply>& reply) {
            if (current())
              on_reply(reply);
          },
          [=](caf::error& err) {
            if (current())
              on_error(err);
          });
}

// Only the engine's callback (an anonymous message) ends a batch, and only the job's in `slot`.
bool is_batch_end(prefill_ptr self, job_slot slot, uint64_t request_id, const char* what) {
  auto& st = self->state;
  if (self->current_sender() != nullptr && self->current_sender() != self->ctrl()) {
    st.bad.refuse(st.name, make_error(errc::access_denied,
                                      std::string{"only the transfer engine ends "} + what));
    return false;
  }
  return is_job(self, slot, request_id);
}

void finish_loading(prefill_ptr self);
void submit_loads(prefill_ptr self);

// Reads, for every block up to the first that has no replica left to try, the next replica of
// each that is not verified yet. A streaming job reads in up to prefill_prefix_load_batches
// batches, in prompt order, so that the first pages can go to decode while the rest load; a
// batch holds at most options.load_batch_bytes_max of KV (at least one block). A round that
// reads from other nodes has no more than that in flight: the next batch goes once the ones
// before leave room, so that a long pull shares the holder's NIC with what else the holder sends
// (its own prefill's hand-off) batch by batch instead of holding it whole (the modeled links run
// a node's operations FIFO, transport/modeled_links.hpp). A small model's loads, and reads from
// this node's own DRAM, all go at once.
void load_round(prefill_ptr self) {
  auto& job = *self->state.current;
  job.loading.clear();
  job.next_load = 0;
  job.round_started_ns = clock_ns(self);
  job.round_remote_ns = 0;
  auto round = job.loads->next_round();
  auto& ops = round.ops;
  const auto& loading = round.blocks;
  if (ops.empty()) {
    finish_loading(self);
    return;
  }
  const size_t batches = streams(self->state, job) ? prefill_prefix_load_batches : 1;
  const uint64_t blocks_max = prefix_batch_pages_max(self->state);
  const size_t per_batch = std::min<size_t>((ops.size() + batches - 1) / batches, blocks_max);
  for (size_t first = 0; first < ops.size(); first += per_batch) {
    const size_t end = std::min(ops.size(), first + per_batch);
    job.loading.push_back(
        {{loading.begin() + static_cast<ptrdiff_t>(first),
          loading.begin() + static_cast<ptrdiff_t>(end)},
         {ops.begin() + static_cast<ptrdiff_t>(first), ops.begin() + static_cast<ptrdiff_t>(end)},
         0});
  }
  // Reads from other nodes hold their NICs: at most blocks_max of them in flight. Reads from
  // this node's DRAM cross only its own link, and all go at once.
  const auto node = self->state.options.node;
  const bool pulls = std::any_of(ops.begin(), ops.end(), [&](const transport::transfer_op& op) {
    return op.remote.node != node;
  });
  job.load_window = pulls ? static_cast<uint32_t>(std::max<uint64_t>(blocks_max / per_batch, 1))
                          : static_cast<uint32_t>(job.loading.size());
  submit_loads(self);
}

// Submits the round's next batches of reads, as many as its window leaves room for. Each is
// counted in flight before it is submitted: one that cannot start ends at once (a message to
// come), and must not end the round meanwhile.
void submit_loads(prefill_ptr self) {
  auto& job = *self->state.current;
  const auto id = job.request_id;
  while (job.next_load < job.loading.size() && job.loads_in_flight < job.load_window) {
    const auto b = job.next_load++;
    ++job.loads_in_flight;
    job.loading[b].submitted_ns = clock_ns(self);
    submit_batch(self, id, std::exchange(job.loading[b].ops, {}), loaded_atom::value, b);
  }
}

// The leading blocks of the prefix that are verified.
uint32_t verified_prefix(const prefill_job& job) {
  return job.loads ? static_cast<uint32_t>(job.loads->verified_prefix()) : 0;
}

// The verified prefix is reused; a block that failed for another reason than being gone is a
// miss, counted. The last prompt token is always computed (its logits give the first output
// token): a prompt found whole recomputes it over its reused KV.
void finish_loading(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  const size_t reused = verified_prefix(job);
  static const std::vector<pool_batches::block_read> none;
  const auto& loads = job.loads ? job.loads->blocks() : none;
  auto remote = [&](const pool_batches::block_read& b) {
    return b.replicas[b.next].node != st.options.node;
  };
  if (reused < loads.size()) {
    const auto& miss = loads[reused];
    if (miss.last_error && !is(miss.last_error, errc::not_found)) {
      spdlog::warn("prefill_worker {}: block {} of request {} is a miss: {}", st.options.instance,
                   reused, job.request_id, describe(miss.last_error));
      ++job.load_misses;
      ++st.load_misses_total;
    }
  }
  const auto prompt = static_cast<uint32_t>(job.tokens.size());
  job.reused_blocks = static_cast<uint32_t>(reused);
  job.reused_tokens = std::min(job.reused_blocks * block_tokens(self), prompt - 1);
  job.position = job.reused_tokens;
  // By tier: read back from SSD, else from another node's DRAM, else (the rest) local DRAM.
  job.remote_reused_tokens = 0;
  job.ssd_reused_tokens = 0;
  for (size_t i = 0; i < reused; ++i) {
    const uint32_t begin = static_cast<uint32_t>(i) * block_tokens(self);
    const uint32_t tokens = std::min(job.reused_tokens, begin + block_tokens(self)) - begin;
    if (loads[i].from_ssd)
      job.ssd_reused_tokens += tokens;
    else if (remote(loads[i]))
      job.remote_reused_tokens += tokens;
  }
  job.pulled.clear();
  job.pulled_nodes.clear();
  job.pulled_blocks = 0;
  job.read_back = {};
  for (size_t i = 0; i < reused; ++i) {
    const auto& b = loads[i];
    if (b.from_ssd) {
      job.read_back.keys.push_back(job.keys[i]);
      job.read_back.nodes.emplace_back().insert(b.replicas[b.next].node);
    }
    if (!remote(b))
      continue;
    const uint32_t from = b.replicas[b.next].node;
    if (std::find(job.pulled_nodes.begin(), job.pulled_nodes.end(), from) == job.pulled_nodes.end())
      job.pulled_nodes.push_back(from);
    ++job.pulled_blocks;
    if (st.options.copy_pulled)
      job.pulled.push_back(i);
  }
  // What the pull took, for the conductor's bandwidth estimate: the modeled time of the reads
  // from other nodes; on a real engine, which times only whole batches, the loads' time from
  // the first read (local reads in it included).
  job.pull_ns = job.pulled_blocks == 0 ? 0
                : job.pull_modeled_ns > 0
                    ? job.pull_modeled_ns
                    : static_cast<uint64_t>(clock_ns(self) - job.load_started_ns);
  job.loads.reset();
  job.loading.clear();
  begin_compute(self);
}

// Only this node's replicas, unless the conductor said to pull: then any, this node's first.
std::vector<transport::region_handle> usable_replicas(prefill_ptr self,
                                                      std::vector<transport::region_handle> rs) {
  const auto node = self->state.options.node;
  if (!self->state.current->pull)
    std::erase_if(rs, [&](const transport::region_handle& h) { return h.node != node; });
  return by_locality(std::move(rs), node);
}

// Blocks the get found, in prompt order, up to the first it did not (or found only where this
// job may not read).
void start_loading(prefill_ptr self, const std::vector<block_location>& found) {
  if (end_if_cancelled(self))
    return;
  auto& st = self->state;
  auto& job = *st.current;
  job.load_started_ns = clock_ns(self);
  auto reads = pool_batches::reads_of(found, job.keys, pool_batches::read_extent::prefix,
                                      [self](std::vector<transport::region_handle> rs) {
                                        return usable_replicas(self, std::move(rs));
                                      });
  std::vector<std::span<std::byte>> pages;
  for (size_t i = 0; i < reads.size(); ++i)
    pages.push_back(page_span(self, job, i));
  // A compressed block is no larger than its page, and is read into the page's front.
  job.loads.emplace(std::move(reads), std::move(pages),
                    st.parts.codec ? pool_batches::read_fit::front : pool_batches::read_fit::exact,
                    pool_batches::read_extent::prefix);
  load_round(self);
}

void commit_blocks(prefill_ptr self, stored_blocks blocks, std::vector<uint64_t> sums,
                   std::vector<block_key> revoke);
void end_store(prefill_ptr self, stored_blocks stored);
void commit_copies(prefill_ptr self, stored_blocks copies, std::vector<uint64_t> sums,
                   std::vector<block_key> revoke);

} // namespace

void lookup_prefix(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.current;
  if (job.keys.empty()) {
    begin_compute(self);
    return;
  }
  ask_master<wire::GetReply>(
      self, computing, get_atom::value,
      pool_protocol::make_get(job.keys, true, st.options.node, job.pull),
      [self](const typed_envelope<wire::GetReply>& reply) {
        auto found = pool_protocol::read_get_reply(reply);
        if (found) {
          start_loading(self, *found);
          return;
        }
        spdlog::warn("prefill_worker: bad prefix reply: {}", describe(found.error()));
        finish_loading(self);
      },
      [self](caf::error& err) {
        spdlog::warn("prefill_worker: prefix lookup failed, computing all: {}", describe(err));
        finish_loading(self);
      });
}

void on_loaded(prefill_ptr self, uint64_t request_id, uint32_t batch,
               const std::vector<caf::error>& results, uint64_t remote_ns) {
  if (!is_batch_end(self, computing, request_id, "a prefix load"))
    return;
  auto& job = *self->state.current;
  // A batch ends once, after it was submitted: its reads are then forgotten.
  if (!job.loads || batch >= job.next_load || results.size() != job.loading[batch].blocks.size() ||
      results.empty()) {
    self->state.bad.refuse(self->state.name,
                           make_error(errc::invalid_argument, "a load's results do not match"));
    return;
  }
  const auto loading = std::exchange(job.loading[batch].blocks, {});
  assert(job.loads_in_flight > 0);
  --job.loads_in_flight;
  if (end_if_cancelled(self)) // the batch has ended: it reads into its pages no more
    return;
  if (remote_ns > 0)
    job.round_remote_ns = std::max(job.round_remote_ns,
                                   static_cast<uint64_t>(std::max<int64_t>(
                                       job.loading[batch].submitted_ns - job.round_started_ns, 0)) +
                                       remote_ns);
  // The pool's checksum covers the stored bytes; a block the codec does not know (another
  // format, codec or calibration) is a miss, never data.
  pool_batches::accept_fn decode;
  if (self->state.parts.codec)
    decode = [self, &job](size_t i, size_t bytes) {
      auto err = decode_in_place(self, job, i, bytes);
      if (err)
        ++self->state.codec_errors_total;
      return err;
    };
  for (const auto& bad : job.loads->settle(loading, results, decode))
    report_corrupt(self, bad.key, bad.node);
  if (streams(self->state, job)) {
    const auto id = job.request_id;
    send_cached_prefix(self, verified_prefix(job)); // may fail the job, or mark it to fail
    if (!self->state.current || self->state.current->request_id != id || end_if_cancelled(self))
      return;
  }
  submit_loads(self); // the round's next batches, as far as its window allows
  if (job.loads_in_flight > 0)
    return;
  job.pull_modeled_ns += job.round_remote_ns; // rounds run one after another
  load_round(self);
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

// Writes every replica of every granted block in one batch; a block with a replica that cannot
// be written is revoked (on_stored). `blocks[i]` is slot i's block in the prompt. Copies of
// pulled blocks (`copies`) are one replica each, on this node.
void write_blocks(prefill_ptr self, const std::vector<size_t>& blocks,
                  const std::vector<put_slot>& slots, bool copies) {
  auto& job = *self->state.storing;
  const auto node = self->state.options.node;
  block_store store;
  store.replicate = copies;
  for (size_t i = 0; i < slots.size(); ++i) {
    const auto& s = slots[i];
    if (s.replicas.empty())
      continue; // exists already (a copy: this node has it), or no room
    const uint64_t bytes = stored_bytes(self, job, blocks[i]);
    auto page = page_span(self, job, blocks[i]);
    bool fits = s.key == job.keys[blocks[i]] && bytes > 0 && bytes <= page.size();
    for (const auto& h : s.replicas)
      fits = fits && h.length == bytes && (!copies || h.node == node);
    if (!fits || (copies && s.replicas.size() != 1)) {
      store.revoke.push_back(s.key);
      continue;
    }
    if (self->state.parts.codec) {
      if (auto err = encode_in_place(self, job, blocks[i], bytes)) {
        spdlog::warn("prefill_worker {}: block {} of request {} not stored: {}",
                     self->state.options.instance, blocks[i], job.request_id, describe(err));
        ++self->state.codec_errors_total;
        store.revoke.push_back(s.key);
        continue;
      }
      page = page.first(bytes);
    }
    store.keys.push_back(s.key);
    store.blocks.push_back(blocks[i]);
    store.bytes.push_back(bytes);
    node_set holders;
    for (const auto& h : s.replicas)
      if (h.node < node_set::capacity)
        holders.insert(h.node);
    store.nodes.push_back(holders);
    store.writes.add(page, s.replicas); // a replica that fails its check revokes the block
  }
  if (!store.writes.ops().empty()) {
    auto ops = store.writes.ops();
    job.storing = std::move(store);
    submit_batch(self, job.request_id, ops, stored_atom::value);
  } else if (copies) {
    commit_copies(self, {}, {}, std::move(store.revoke));
  } else {
    commit_blocks(self, {}, {}, std::move(store.revoke));
  }
}

} // namespace

void store_new_blocks(prefill_ptr self) {
  auto& st = self->state;
  auto& job = *st.storing;
  const size_t first = job.reused_blocks;
  const size_t last = job.keys.size();
  if (first >= last) {
    end_store(self, {});
    return;
  }
  std::vector<uint64_t> sizes;
  std::vector<uint32_t> positions;
  for (size_t i = first; i < last; ++i) {
    sizes.push_back(stored_bytes(self, job, i));
    positions.push_back(static_cast<uint32_t>(i));
  }
  auto msg = pool_protocol::make_put_start(
      {st.options.node, st.options.replicas, to_wire(st.options.placement),
       std::span{job.keys}.subspan(first, last - first), sizes, positions});
  ask_master<wire::PutStartReply>(
      self, storing, put_start_atom::value, std::move(msg),
      [=](const typed_envelope<wire::PutStartReply>& reply) {
        auto slots = pool_protocol::read_put_start_reply(reply);
        if (!slots || slots->size() != last - first) {
          spdlog::warn("prefill_worker: bad put reply; blocks not stored");
          end_store(self, {});
          return;
        }
        std::vector<size_t> blocks(last - first);
        std::iota(blocks.begin(), blocks.end(), first);
        // Blocks only on SSD (computed here again, since this node reads no other's copy): the
        // pages in hand become DRAM copies on this node, as pulled blocks do, after the new ones.
        auto& copied = self->state.storing->pulled;
        for (size_t i = 0; i < slots->size(); ++i)
          if ((*slots)[i].only_on_ssd)
            copied.push_back(blocks[i]);
        write_blocks(self, blocks, *slots, false);
      },
      [=](caf::error& err) {
        spdlog::warn("prefill_worker: put_start failed: {}", describe(err));
        end_store(self, {});
      });
}

void on_stored(prefill_ptr self, uint64_t request_id, const std::vector<caf::error>& results) {
  if (!is_batch_end(self, storing, request_id, "a store of new blocks"))
    return;
  auto& job = *self->state.storing;
  if (!job.storing) {
    self->state.bad.refuse(self->state.name,
                           make_error(errc::invalid_argument, "no store of new blocks is running"));
    return;
  }
  auto store = std::move(*job.storing);
  job.storing.reset();
  stored_blocks written;
  std::vector<uint64_t> sums;
  const auto ok = store.writes.written(results);
  for (size_t i = 0; i < store.keys.size(); ++i) {
    if (!ok[i]) {
      store.revoke.push_back(store.keys[i]);
      continue;
    }
    written.keys.push_back(store.keys[i]);
    written.nodes.push_back(store.nodes[i]);
    sums.push_back(store.writes.checksum(i)); // what its replicas were checked against
  }
  if (store.replicate)
    commit_copies(self, std::move(written), std::move(sums), std::move(store.revoke));
  else
    commit_blocks(self, std::move(written), std::move(sums), std::move(store.revoke));
}

namespace {

void revoke_blocks(prefill_ptr self, const std::vector<block_key>& keys) {
  if (keys.empty())
    return;
  auto msg = pool_protocol::make_put_revoke(keys);
  self->request(self->state.parts.dir->store_master, control_timeout, put_revoke_atom::value, msg)
      .then([] {}, [](caf::error&) {});
}

void commit_blocks(prefill_ptr self, stored_blocks blocks, std::vector<uint64_t> sums,
                   std::vector<block_key> revoke) {
  revoke_blocks(self, revoke);
  if (blocks.keys.empty()) {
    end_store(self, {});
    return;
  }
  auto msg = pool_protocol::make_put_commit(blocks.keys, sums);
  const auto id = self->state.storing->request_id;
  self->request(self->state.parts.dir->store_master, control_timeout, put_commit_atom::value, msg)
      .then(
          [=]() {
            if (self->state.storing && self->state.storing->request_id == id)
              end_store(self, blocks);
          },
          [=](caf::error& err) {
            spdlog::warn("prefill_worker: commit failed, revoking: {}", describe(err));
            revoke_blocks(self, blocks.keys);
            if (self->state.storing && self->state.storing->request_id == id)
              end_store(self, {});
          });
}

// The new blocks are stored (or not). Blocks this job pulled from other nodes then become
// replicas on this node too: a hot prefix spreads to the nodes that read it, and the next job
// here that needs it reads it locally (Mooncake's replication of hot blocks, section 6.2). So do
// blocks it computed that the pool holds only on SSD: a DRAM copy again, from the pages in hand.
// Copies are best effort: any trouble and the job ends with what it has.
void end_store(prefill_ptr self, stored_blocks stored) {
  auto& st = self->state;
  auto& job = *st.storing;
  auto pulled = std::exchange(job.pulled, {});
  if (pulled.empty()) {
    finish_store(self, std::move(stored));
    return;
  }
  job.stored = std::move(stored);
  std::vector<block_key> keys;
  std::vector<uint64_t> sizes;
  std::vector<uint32_t> positions;
  for (auto i : pulled) {
    keys.push_back(job.keys[i]);
    sizes.push_back(stored_bytes(self, job, i));
    positions.push_back(static_cast<uint32_t>(i));
  }
  auto msg = pool_protocol::make_put_start(
      {st.options.node, 1, wire::ReplicaPlacement::LOCAL_FIRST, keys, sizes, positions, true});
  ask_master<wire::PutStartReply>(
      self, storing, put_start_atom::value, std::move(msg),
      [=](const typed_envelope<wire::PutStartReply>& reply) {
        auto slots = pool_protocol::read_put_start_reply(reply);
        if (!slots || slots->size() != pulled.size()) {
          spdlog::warn("prefill_worker: bad replica put reply; no copies made");
          finish_store(self, std::move(self->state.storing->stored));
          return;
        }
        write_blocks(self, pulled, *slots, true);
      },
      [=](caf::error& err) {
        spdlog::warn("prefill_worker: replica put_start failed: {}", describe(err));
        finish_store(self, std::move(self->state.storing->stored));
      });
}

// Committed copies join the job's report: the conductor learns this node holds them.
void commit_copies(prefill_ptr self, stored_blocks copies, std::vector<uint64_t> sums,
                   std::vector<block_key> revoke) {
  revoke_blocks(self, revoke);
  if (copies.keys.empty()) {
    finish_store(self, std::move(self->state.storing->stored));
    return;
  }
  auto msg = pool_protocol::make_put_commit(copies.keys, sums, true);
  const auto id = self->state.storing->request_id;
  self->request(self->state.parts.dir->store_master, control_timeout, put_commit_atom::value, msg)
      .then(
          [=]() {
            if (!self->state.storing || self->state.storing->request_id != id)
              return;
            auto stored = std::move(self->state.storing->stored);
            stored.keys.insert(stored.keys.end(), copies.keys.begin(), copies.keys.end());
            stored.nodes.insert(stored.nodes.end(), copies.nodes.begin(), copies.nodes.end());
            finish_store(self, std::move(stored));
          },
          [=](caf::error& err) {
            // Some may have been recorded; a revoke frees the rest. The conductor is not told
            // of any: it may miss a local copy, never expect one that is not there.
            spdlog::warn("prefill_worker: replica commit failed: {}", describe(err));
            revoke_blocks(self, copies.keys);
            if (self->state.storing && self->state.storing->request_id == id)
              finish_store(self, std::move(self->state.storing->stored));
          });
}

} // namespace

} // namespace crescent
