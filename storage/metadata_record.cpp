// The persisted form of a block record: a Cap'n Proto wire::BlockRecord, so that the format can
// grow fields without a migration.
#include "messages/errors.hpp"
#include "messages/schema/store.capnp.h"
#include "storage/metadata_store.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

namespace crescent::storage {

std::string encode_record(const block_record& record) {
  capnp::MallocMessageBuilder builder;
  auto out = builder.initRoot<wire::BlockRecord>();
  out.setKey(record.key);
  out.setNode(record.handle.node);
  transport::to_wire(record.handle, out.initHandle());
  out.setSizeBytes(record.size_bytes);
  out.setChecksum(record.checksum);
  out.setState(record.state == block_state::complete ? wire::BlockState::COMPLETE
                                                     : wire::BlockState::PENDING);
  auto flat = capnp::messageToFlatArray(builder);
  auto bytes = flat.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

caf::expected<block_record> decode_record(std::string_view bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    return make_error(errc::malformed_message,
                      "stored block record of " + std::to_string(bytes.size()) + " bytes");
  // RocksDB values are not word-aligned; Cap'n Proto needs aligned words.
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::FlatArrayMessageReader reader(words.asPtr());
    auto in = reader.getRoot<wire::BlockRecord>();
    block_record r;
    r.key = in.getKey();
    r.handle = transport::from_wire(in.getHandle());
    r.size_bytes = in.getSizeBytes();
    r.checksum = in.getChecksum();
    switch (in.getState()) {
    case wire::BlockState::PENDING:
      r.state = block_state::pending;
      break;
    case wire::BlockState::COMPLETE:
      r.state = block_state::complete;
      break;
    default:
      return make_error(errc::malformed_message, "stored block record in an unknown state");
    }
    return r;
  } catch (const kj::Exception& ex) {
    return make_error(errc::malformed_message,
                      std::string{"stored block record: "} + ex.getDescription().cStr());
  }
}

} // namespace crescent::storage
