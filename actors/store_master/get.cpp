// Reads: the longest complete prefix of a chain of block keys, and reports of corrupt blocks.
#include "actors/store_master/store_master_state.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"

#include <caf/stateful_actor.hpp>

namespace crescent {

caf::result<envelope> on_get_prefix(store_master_ptr self, const envelope& msg) {
  auto& st = self->state;
  auto keys = read_as<wire::GetPrefix>(msg, [](wire::GetPrefix::Reader in) {
    auto list = in.getKeys();
    return to_vector(list);
  });
  if (!keys)
    return st.bad.refuse(st.name, std::move(keys.error()));
  if (keys->size() > storage::metadata_store::batch_max)
    return st.bad.refuse(st.name, make_error(errc::limit_exceeded, "prefix query above 4096 keys"));
  std::vector<storage::block_record> found;
  for (auto key : *keys) {
    auto r = st.metadata->find(key);
    if (!r || r->state != storage::block_state::complete)
      break;
    found.push_back(*r);
  }
  return make_envelope<wire::GetPrefixReply>([&](wire::GetPrefixReply::Builder out) {
    auto list = out.initBlocks(static_cast<unsigned>(found.size()));
    for (unsigned i = 0; i < found.size(); ++i) {
      list[i].setKey(found[i].key);
      transport::to_wire(found[i].handle, list[i].initHandle());
      list[i].setChecksum(found[i].checksum);
    }
  });
}

caf::result<void> on_corrupt(store_master_ptr self, const envelope& msg) {
  auto& st = self->state;
  auto key =
      read_as<wire::ReportCorrupt>(msg, [](wire::ReportCorrupt::Reader in) { return in.getKey(); });
  if (!key)
    return st.bad.refuse(st.name, std::move(key.error()));
  auto r = st.metadata->find(*key);
  if (!r || r->state != storage::block_state::complete)
    return caf::unit; // already gone: several readers may report the same block
  ++st.corrupt_reports;
  const uint64_t keys[] = {*key};
  auto erased = st.metadata->erase(keys);
  if (!erased)
    return std::move(erased.error());
  // There are no read leases yet: a reader still holding the old handle may read the slot after
  // it is reused, and its checksum check turns that into a miss, never into wrong data.
  std::vector<transport::region_handle> slots;
  for (const auto& e : *erased)
    slots.push_back(e.handle);
  release_slots(self, slots);
  return caf::unit;
}

} // namespace crescent
