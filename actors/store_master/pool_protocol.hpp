// The client side of the store master's protocol, encoded and decoded in one place: the
// prefill worker (from its actor) and the pool client library (blocking) both speak it.
#pragma once

#include "messages/block_key.hpp"
#include "messages/envelope_schemas.hpp"
#include "messages/schema/store.capnp.h"
#include "transport/region_handle.hpp"

#include <caf/expected.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace crescent::pool_protocol {

/// A block a get found: where its replicas are and what its bytes must hash to. No replicas:
/// not readable now (a miss).
struct block_location {
  block_key key;
  uint64_t size_bytes = 0;
  uint64_t checksum = 0;
  std::vector<transport::region_handle> replicas;
  bool from_ssd = false; // promoted from an SSD tier for this get
};

/// Space granted by put_start for one key; no replicas: skip this block (it exists already, or
/// there was no room). `only_on_ssd`: it exists, in no live node's DRAM (PutSlot.onlyOnSsd).
struct put_slot {
  block_key key;
  std::vector<transport::region_handle> replicas;
  bool only_on_ssd = false;
};

struct put_start_args {
  uint32_t node = 0; // the client's node (local-first placement)
  uint32_t replicas = 1;
  wire::ReplicaPlacement placement = wire::ReplicaPlacement::MOST_FREE;
  std::span<const block_key> keys;
  std::span<const uint64_t> sizes;     // per key
  std::span<const uint32_t> positions; // per key: its position in its prefix chain
  bool replicate = false;              // one more replica of existing blocks on `node`
};

/// A get; `reader` and `pull` say where a block only on SSD is read back (wire::Get).
typed_envelope<wire::Get> make_get(std::span<const block_key> keys, bool prefix_only,
                                   std::optional<uint32_t> reader = std::nullopt, bool pull = true);
caf::expected<std::vector<block_location>>
read_get_reply(const typed_envelope<wire::GetReply>& reply);

typed_envelope<wire::PutStart> make_put_start(const put_start_args& a);
caf::expected<std::vector<put_slot>>
read_put_start_reply(const typed_envelope<wire::PutStartReply>& reply);

typed_envelope<wire::PutCommit> make_put_commit(std::span<const block_key> keys,
                                                std::span<const uint64_t> checksums,
                                                bool replicas = false);
typed_envelope<wire::PutRevoke> make_put_revoke(std::span<const block_key> keys);
typed_envelope<wire::Remove> make_remove(std::span<const block_key> keys);
typed_envelope<wire::ReportCorrupt> make_report_corrupt(block_key key, uint32_t node);

} // namespace crescent::pool_protocol
