#include "actors/store_master/pool_protocol.hpp"

#include "messages/checked_read.hpp"
#include "transport/region_handle.hpp"

namespace crescent::pool_protocol {

namespace {

void fill(capnp::List<uint64_t>::Builder out, std::span<const uint64_t> values) {
  for (unsigned i = 0; i < values.size(); ++i)
    out.set(i, values[i]);
}

template <class T>
unsigned count(std::span<const T> values) {
  return static_cast<unsigned>(values.size());
}

} // namespace

typed_envelope<wire::Get> make_get(std::span<const block_key> keys, bool prefix_only,
                                   std::optional<uint32_t> reader, bool pull) {
  return make_envelope<wire::Get>([&](wire::Get::Builder out) {
    write_keys(out.initKeys(count(keys)), keys);
    out.setPrefixOnly(prefix_only);
    if (reader)
      out.setReader(*reader);
    out.setPull(pull);
  });
}

caf::expected<std::vector<block_location>>
read_get_reply(const typed_envelope<wire::GetReply>& reply) {
  return read_as<wire::GetReply>(reply, [](wire::GetReply::Reader in) {
    std::vector<block_location> out;
    for (auto b : in.getBlocks()) {
      block_location loc{
          read_key(b.getKey()), b.getSizeBytes(), b.getChecksum(), {}, b.getFromSsd()};
      for (auto h : b.getReplicas())
        loc.replicas.push_back(transport::from_wire(h));
      out.push_back(std::move(loc));
    }
    return out;
  });
}

typed_envelope<wire::PutStart> make_put_start(const put_start_args& a) {
  return make_envelope<wire::PutStart>([&](wire::PutStart::Builder out) {
    out.setNode(a.node);
    out.setReplicaCount(a.replicas);
    out.setPlacement(a.placement);
    write_keys(out.initKeys(count(a.keys)), a.keys);
    fill(out.initSizes(count(a.sizes)), a.sizes);
    auto positions = out.initChainPositions(static_cast<unsigned>(a.positions.size()));
    for (unsigned i = 0; i < a.positions.size(); ++i)
      positions.set(i, a.positions[i]);
    out.setReplicate(a.replicate);
  });
}

caf::expected<std::vector<put_slot>>
read_put_start_reply(const typed_envelope<wire::PutStartReply>& reply) {
  return read_as<wire::PutStartReply>(reply, [](wire::PutStartReply::Reader in) {
    std::vector<put_slot> out;
    for (auto s : in.getSlots()) {
      put_slot x{read_key(s.getKey()), {}, s.isOnlyOnSsd()};
      if (s.isReplicas())
        for (auto h : s.getReplicas())
          x.replicas.push_back(transport::from_wire(h));
      out.push_back(std::move(x));
    }
    return out;
  });
}

typed_envelope<wire::PutCommit> make_put_commit(std::span<const block_key> keys,
                                                std::span<const uint64_t> checksums,
                                                bool replicas) {
  return make_envelope<wire::PutCommit>([&](wire::PutCommit::Builder out) {
    write_keys(out.initKeys(count(keys)), keys);
    fill(out.initChecksums(count(checksums)), checksums);
    out.setReplicas(replicas);
  });
}

typed_envelope<wire::PutRevoke> make_put_revoke(std::span<const block_key> keys) {
  return make_envelope<wire::PutRevoke>(
      [&](wire::PutRevoke::Builder out) { write_keys(out.initKeys(count(keys)), keys); });
}

typed_envelope<wire::Remove> make_remove(std::span<const block_key> keys) {
  return make_envelope<wire::Remove>(
      [&](wire::Remove::Builder out) { write_keys(out.initKeys(count(keys)), keys); });
}

typed_envelope<wire::ReportCorrupt> make_report_corrupt(block_key key, uint32_t node) {
  return make_envelope<wire::ReportCorrupt>([&](wire::ReportCorrupt::Builder out) {
    write_key(out.initKey(), key);
    out.setNode(node);
  });
}

} // namespace crescent::pool_protocol
