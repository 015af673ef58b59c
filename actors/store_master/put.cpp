// Puts: put_start reserves slots on a block owner and records them pending; the writer then
// writes the bytes through the transfer engine and put_commit makes them readable.
#include "actors/common/timeouts.hpp"
#include "actors/store_master/store_master_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/stateful_actor.hpp>

#include <unordered_set>

namespace crescent {

namespace {

constexpr uint64_t block_bytes_max = 64ull << 20;

struct put_start_args {
  uint32_t node = 0;
  uint64_t block_bytes = 0;
  std::vector<uint64_t> keys;
};

std::vector<uint64_t> read_keys(capnp::List<uint64_t>::Reader in) {
  return to_vector(in);
}

caf::error check_keys(const std::vector<uint64_t>& keys) {
  if (keys.empty() || keys.size() > storage::metadata_store::batch_max)
    return make_error(errc::limit_exceeded, "a batch holds 1 to " +
                                                std::to_string(storage::metadata_store::batch_max) +
                                                " keys, not " + std::to_string(keys.size()));
  return caf::none;
}

enum class slot_kind { handle, exists, no_space };

struct slot_result {
  uint64_t key;
  slot_kind kind;
  transport::region_handle handle;
};

envelope make_put_reply(const std::vector<slot_result>& slots) {
  return make_envelope<wire::PutStartReply>([&](wire::PutStartReply::Builder out) {
    auto list = out.initSlots(static_cast<unsigned>(slots.size()));
    for (unsigned i = 0; i < slots.size(); ++i) {
      list[i].setKey(slots[i].key);
      switch (slots[i].kind) {
      case slot_kind::handle:
        transport::to_wire(slots[i].handle, list[i].initHandle());
        break;
      case slot_kind::exists:
        list[i].setExists();
        break;
      case slot_kind::no_space:
        list[i].setNoSpace();
        break;
      }
    }
  });
}

// Called with the owner's slots. Keys claimed by another put while the allocation was in flight
// are now "exists" and their slots go back.
caf::expected<envelope> finish_put_start(store_master_ptr self, const put_start_args& args,
                                         const std::vector<uint64_t>& fresh,
                                         const std::vector<transport::region_handle>& slots) {
  auto& md = *self->state.metadata;
  std::vector<storage::block_record> records;
  std::vector<transport::region_handle> unused;
  std::unordered_map<uint64_t, transport::region_handle> granted;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (i >= fresh.size() || md.find(fresh[i])) {
      unused.push_back(slots[i]);
      continue;
    }
    records.push_back(storage::block_record{fresh[i], slots[i], args.block_bytes, 0,
                                            storage::block_state::pending});
    granted.emplace(fresh[i], slots[i]);
  }
  if (auto err = md.put_pending(records)) {
    for (const auto& r : records)
      unused.push_back(r.handle);
    release_slots(self, unused);
    return err;
  }
  release_slots(self, unused);
  std::vector<slot_result> out;
  for (auto key : args.keys) {
    if (auto g = granted.find(key); g != granted.end())
      out.push_back({key, slot_kind::handle, g->second});
    else if (md.find(key))
      out.push_back({key, slot_kind::exists, {}});
    else
      out.push_back({key, slot_kind::no_space, {}});
  }
  return make_put_reply(out);
}

} // namespace

caf::result<envelope> on_put_start(store_master_ptr self, const envelope& msg) {
  auto& st = self->state;
  auto args = read_as<wire::PutStart>(msg, [](wire::PutStart::Reader in) {
    return put_start_args{in.getNode(), in.getBlockBytes(), read_keys(in.getKeys())};
  });
  if (!args)
    return st.bad.refuse(st.name, std::move(args.error()));
  if (auto err = check_keys(args->keys))
    return st.bad.refuse(st.name, std::move(err));
  if (args->block_bytes == 0 || args->block_bytes > block_bytes_max)
    return st.bad.refuse(st.name,
                         make_error(errc::invalid_argument, "block size must be in [1, 64 MiB]"));
  if (args->node >= st.dir->block_owners.size())
    return st.bad.refuse(
        st.name,
        make_error(errc::invalid_argument, "no block owner on node " + std::to_string(args->node)));
  std::vector<uint64_t> fresh;
  std::unordered_set<uint64_t> seen;
  for (auto key : args->keys)
    if (!st.metadata->find(key) && seen.insert(key).second)
      fresh.push_back(key);
  if (fresh.empty())
    return finish_put_start(self, *args, fresh, {});
  auto request = make_envelope<wire::Allocate>([&](wire::Allocate::Builder out) {
    out.setCount(static_cast<uint32_t>(fresh.size()));
    out.setBlockBytes(args->block_bytes);
  });
  auto rp = self->make_response_promise<envelope>();
  self->request(st.dir->block_owners[args->node], control_timeout, allocate_atom::value, request)
      .then(
          [=](const envelope& reply) mutable {
            auto slots = read_as<wire::AllocateReply>(reply, [](wire::AllocateReply::Reader in) {
              std::vector<transport::region_handle> out;
              for (auto h : in.getHandles())
                out.push_back(transport::from_wire(h));
              return out;
            });
            if (!slots) {
              rp.deliver(std::move(slots.error()));
              return;
            }
            auto answer = finish_put_start(self, *args, fresh, *slots);
            if (answer)
              rp.deliver(std::move(*answer));
            else
              rp.deliver(std::move(answer.error()));
          },
          [=](caf::error& err) mutable { rp.deliver(std::move(err)); });
  return rp;
}

caf::result<void> on_put_commit(store_master_ptr self, const envelope& msg) {
  auto& st = self->state;
  struct commit_args {
    std::vector<uint64_t> keys;
    std::vector<uint64_t> checksums;
  };
  auto args = read_as<wire::PutCommit>(msg, [](wire::PutCommit::Reader in) {
    return commit_args{read_keys(in.getKeys()), read_keys(in.getChecksums())};
  });
  if (!args)
    return st.bad.refuse(st.name, std::move(args.error()));
  if (auto err = check_keys(args->keys))
    return st.bad.refuse(st.name, std::move(err));
  if (auto err = st.metadata->commit(args->keys, args->checksums))
    return st.bad.refuse(st.name, std::move(err));
  return caf::unit;
}

caf::result<void> on_put_revoke(store_master_ptr self, const envelope& msg) {
  auto& st = self->state;
  auto keys = read_as<wire::PutRevoke>(
      msg, [](wire::PutRevoke::Reader in) { return read_keys(in.getKeys()); });
  if (!keys)
    return st.bad.refuse(st.name, std::move(keys.error()));
  if (auto err = check_keys(*keys))
    return st.bad.refuse(st.name, std::move(err));
  // Only pending blocks can be revoked: a complete block belongs to every reader now.
  std::vector<uint64_t> pending;
  for (auto key : *keys)
    if (auto r = st.metadata->find(key); r && r->state == storage::block_state::pending)
      pending.push_back(key);
  auto erased = st.metadata->erase(pending);
  if (!erased)
    return std::move(erased.error());
  std::vector<transport::region_handle> slots;
  for (const auto& r : *erased)
    slots.push_back(r.handle);
  release_slots(self, slots);
  return caf::unit;
}

} // namespace crescent
