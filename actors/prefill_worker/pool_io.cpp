// The prefill worker and the KV pool: loading the cached prefix before computing, storing the
// prompt's new full blocks after the hand-off. Pool trouble never fails a request: a block that
// cannot be read is recomputed, a block that cannot be stored is simply not cached.
#include "actors/common/timeouts.hpp"
#include "actors/prefill_worker/prefill_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "storage/checksum.hpp"

#include <caf/stateful_actor.hpp>
#include <spdlog/spdlog.h>

namespace crescent {

namespace {

struct location {
  uint64_t key;
  transport::region_handle handle;
  uint64_t checksum;
};

struct slot {
  uint64_t key;
  std::optional<transport::region_handle> handle;
};

std::span<std::byte> page_span(prefill_ptr self, size_t i) {
  auto& job = *self->state.current;
  return {job.page_ptrs[i], self->state.parts.engine->config().page_bytes()};
}

void report_corrupt(prefill_ptr self, uint64_t key) {
  auto msg = make_envelope<wire::ReportCorrupt>(
      [&](wire::ReportCorrupt::Builder out) { out.setKey(key); });
  self->request(self->state.parts.dir->store_master, control_timeout, corrupt_atom::value, msg)
      .then([] {}, [](caf::error&) {});
}

// Reads the found blocks into the local pages, in order, stopping at the first that fails.
void load_blocks(prefill_ptr self, const std::vector<location>& found) {
  auto& st = self->state;
  auto& job = *st.current;
  const size_t usable = (job.tokens.size() - 1) / st.parts.engine->config().block_tokens;
  for (size_t i = 0; i < found.size() && i < usable; ++i) {
    const auto& loc = found[i];
    auto page = page_span(self, i);
    caf::error err;
    if (loc.key != job.keys[i] || loc.handle.length != page.size())
      err = make_error(errc::invalid_argument, "store master returned a mismatched block");
    else
      err = st.parts.transfer->read(loc.handle, 0, page);
    if (!err && storage::block_checksum(page) != loc.checksum) {
      err = make_error(errc::checksum_mismatch, "block " + std::to_string(loc.key));
      report_corrupt(self, loc.key);
    }
    if (err) {
      spdlog::warn("prefill_worker {}: block {} of request {} is a miss: {}", st.options.instance,
                   i, job.request_id, describe(err));
      ++job.load_misses;
      ++st.load_misses_total;
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
  auto msg = make_envelope<wire::GetPrefix>([&](wire::GetPrefix::Builder out) {
    auto keys = out.initKeys(static_cast<unsigned>(usable));
    for (unsigned i = 0; i < usable; ++i)
      keys.set(i, job.keys[i]);
  });
  self->request(st.parts.dir->store_master, control_timeout, get_prefix_atom::value, msg)
      .then(
          [=](const envelope& reply) {
            auto found = read_as<wire::GetPrefixReply>(reply, [](wire::GetPrefixReply::Reader in) {
              std::vector<location> out;
              for (auto b : in.getBlocks())
                out.push_back({b.getKey(), transport::from_wire(b.getHandle()), b.getChecksum()});
              return out;
            });
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
  auto msg = make_envelope<wire::PutStart>([&](wire::PutStart::Builder out) {
    out.setNode(st.options.node);
    out.setBlockBytes(model.page_bytes());
    auto keys = out.initKeys(static_cast<unsigned>(last - first));
    for (size_t i = first; i < last; ++i)
      keys.set(static_cast<unsigned>(i - first), job.keys[i]);
  });
  self->request(st.parts.dir->store_master, control_timeout, put_start_atom::value, msg)
      .then(
          [=](const envelope& reply) {
            auto slots = read_as<wire::PutStartReply>(reply, [](wire::PutStartReply::Reader in) {
              std::vector<slot> out;
              for (auto s : in.getSlots())
                out.push_back({s.getKey(), s.isHandle()
                                               ? std::optional{transport::from_wire(s.getHandle())}
                                               : std::nullopt});
              return out;
            });
            if (!slots || slots->size() != last - first) {
              spdlog::warn("prefill_worker: bad put reply; blocks not stored");
              finish_job(self, {});
              return;
            }
            std::vector<uint64_t> keys, sums, revoke;
            for (size_t i = 0; i < slots->size(); ++i) {
              const auto& s = (*slots)[i];
              if (!s.handle)
                continue;
              auto page = page_span(self, first + i);
              auto& cur = *self->state.current;
              if (s.key != cur.keys[first + i] ||
                  self->state.parts.transfer->write(*s.handle, 0, page)) {
                revoke.push_back(s.key);
                continue;
              }
              keys.push_back(s.key);
              sums.push_back(storage::block_checksum(page));
            }
            commit_blocks(self, std::move(keys), std::move(sums), std::move(revoke));
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
  auto msg = make_envelope<wire::PutRevoke>([&](wire::PutRevoke::Builder out) {
    auto list = out.initKeys(static_cast<unsigned>(keys.size()));
    for (unsigned i = 0; i < keys.size(); ++i)
      list.set(i, keys[i]);
  });
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
  auto msg = make_envelope<wire::PutCommit>([&](wire::PutCommit::Builder out) {
    auto k = out.initKeys(static_cast<unsigned>(keys.size()));
    auto c = out.initChecksums(static_cast<unsigned>(sums.size()));
    for (unsigned i = 0; i < keys.size(); ++i) {
      k.set(i, keys[i]);
      c.set(i, sums[i]);
    }
  });
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
