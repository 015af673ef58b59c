// The persisted form of a complete block: a Cap'n Proto wire::ObjectRecord.
#include "messages/errors.hpp"
#include "messages/schema/store.capnp.h"
#include "storage/object_store.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include <cstring>

namespace crescent::storage {

std::string encode_object(const object_record& r) {
  capnp::MallocMessageBuilder builder;
  auto out = builder.initRoot<wire::ObjectRecord>();
  write_key(out.initKey(), r.key);
  out.setSizeBytes(r.size_bytes);
  out.setChecksum(r.checksum);
  out.setHardPin(r.hard_pin);
  auto list = out.initReplicas(static_cast<unsigned>(r.replicas.size()));
  for (unsigned i = 0; i < r.replicas.size(); ++i) {
    list[i].setNode(r.replicas[i].node);
    list[i].setInDram(r.replicas[i].in_dram);
    transport::to_wire(r.replicas[i].dram, list[i].initDram());
    list[i].setOnSsd(r.replicas[i].on_ssd);
  }
  auto flat = capnp::messageToFlatArray(builder); // keep it alive while its bytes are copied
  auto bytes = flat.asBytes();
  return std::string(reinterpret_cast<const char*>(bytes.begin()), bytes.size());
}

caf::expected<object_record> decode_object(std::string_view bytes) {
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0)
    return make_error(errc::malformed_message, "stored block record of the wrong size");
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  try {
    capnp::FlatArrayMessageReader reader(words.asPtr());
    auto in = reader.getRoot<wire::ObjectRecord>();
    object_record r;
    r.key = read_key(in.getKey());
    r.size_bytes = in.getSizeBytes();
    r.checksum = in.getChecksum();
    r.hard_pin = in.getHardPin();
    r.state = object_state::complete;
    if (in.getReplicas().size() > object_store::replicas_max)
      return make_error(errc::malformed_message, "stored block with too many replicas");
    for (auto x : in.getReplicas())
      r.replicas.push_back(
          {x.getNode(), x.getInDram(), transport::from_wire(x.getDram()), x.getOnSsd()});
    return r;
  } catch (const kj::Exception& ex) {
    return make_error(errc::malformed_message,
                      std::string{"stored block record: "} + ex.getDescription().cStr());
  }
}

} // namespace crescent::storage
