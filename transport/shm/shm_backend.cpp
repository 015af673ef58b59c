// The shared-memory path between processes of one host: the initiator maps the owner's region
// table and the memfd segments its regions live in (host_peers.hpp), checks the handle against
// the table, and copies directly. The owner's code takes no part in the copy. GPU regions are
// refused (unavailable): the cuda path, ahead of this one, carries them.
#include "messages/errors.hpp"
#include "transport/engine_internal.hpp"
#include "transport/host_peers.hpp"

namespace crescent::transport {

namespace {

class shm_backend final : public backend {
 public:
  explicit shm_backend(transfer_engine::impl& engine) : engine_(engine) {}

  const char* name() const override { return "shm"; }

  caf::error add_peer(const peer_info& info) override { return peers_.add(engine_.host_id, info); }

  void remove_peer(uint32_t node) override { peers_.remove(node); }

  // Not GPU regions of a peer: the cuda path carries those, and should it fail, its reason is
  // the operation's (a refusal from this path would replace it).
  bool can_carry(const transfer_op& op) const override {
    auto peer = peers_.find(op.remote.node);
    if (!peer)
      return true; // start() says why not
    auto e = peer->table->lookup(op.remote, op.remote_offset, op.local.size());
    return !e || !e->device.location.is_gpu();
  }

  void start(slice_record& s) override {
    if (injected_failure(s))
      return;
    auto peer = peers_.find(s.remote.node);
    if (!peer)
      return complete_slice(s, make_error(errc::unavailable, "no shared-memory route"));
    auto e = peer->table->lookup(s.remote, s.remote_offset, s.length);
    if (!e)
      return complete_slice(s, std::move(e.error()));
    if (e->device.location.is_gpu())
      return complete_slice(s, make_error(errc::unavailable,
                                          "the region is GPU memory (" +
                                              to_string(e->device.location) +
                                              "): the shared-memory path copies host memory only"));
    auto bytes = peer->host_bytes(*e, s.remote, s.remote_offset, s.length);
    if (!bytes)
      return complete_slice(s, std::move(bytes.error()));
    complete_slice(s, copy_slice(s, bytes->second));
  }

 private:
  transfer_engine::impl& engine_;
  host_peers peers_;
};

} // namespace

std::unique_ptr<backend> make_shm_backend(transfer_engine::impl& engine) {
  return std::make_unique<shm_backend>(engine);
}

} // namespace crescent::transport
