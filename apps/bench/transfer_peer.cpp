#include "apps/bench/transfer_peer.hpp"

#include "actors/common/actor_system_setup.hpp"
#include "apps/bench/cpu_sets.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/bench.capnp.h"
#include "transport/device_memory.hpp"
#include "transport/host_memory.hpp"
#include "transport/peer_wire.hpp"
#include "transport/tcp/socket_io.hpp"
#include "transport/transfer_engine.hpp"

#include <caf/actor_system.hpp>
#include <caf/io/middleman.hpp>
#include <caf/stateful_actor.hpp>
#include <fmt/format.h>
#include <sys/socket.h>
#include <unistd.h>
#include <xxhash.h>

#include <thread>
#include <vector>

namespace crescent::bench {

namespace {

struct peer_state {
  static inline const char* name = "transfer_peer";
  std::shared_ptr<transport::transfer_engine> engine;
  transport::region_handle region;
  std::byte* base = nullptr;
  caf::expected<transport::region_handle> gpu_region{caf::error{}};
};

transfer_peer_actor::behavior_type
transfer_peer(transfer_peer_actor::stateful_pointer<peer_state> self,
              std::shared_ptr<transport::transfer_engine> engine, transport::region_handle region,
              std::byte* base, caf::expected<transport::region_handle> gpu_region) {
  self->state.engine = std::move(engine);
  self->state.region = region;
  self->state.base = base;
  self->state.gpu_region = std::move(gpu_region);
  return {
      [=](peer_atom) {
        auto info = self->state.engine->self_info();
        return make_envelope<wire::TransportPeer>(
            [&](wire::TransportPeer::Builder out) { transport::to_wire(info, out); });
      },
      [=](region_atom) {
        return make_envelope<wire::RegionHandle>(
            [&](wire::RegionHandle::Builder out) { transport::to_wire(self->state.region, out); });
      },
      [=](gpu_region_atom) -> caf::result<typed_envelope<wire::RegionHandle>> {
        const auto& gpu = self->state.gpu_region;
        if (!gpu)
          return gpu.error();
        return make_envelope<wire::RegionHandle>(
            [&](wire::RegionHandle::Builder out) { transport::to_wire(*gpu, out); });
      },
      [=](digest_atom,
          const typed_envelope<wire::ByteRange>& msg) -> caf::result<typed_envelope<wire::Digest>> {
        auto range = read_as<wire::ByteRange>(msg, [](wire::ByteRange::Reader in) {
          return std::make_pair(in.getOffset(), in.getLength());
        });
        if (!range)
          return std::move(range.error());
        const auto [offset, length] = *range;
        if (offset > self->state.region.length || length > self->state.region.length - offset)
          return make_error(errc::out_of_range, "digest range outside the region");
        const uint64_t sum = XXH3_64bits(self->state.base + offset, length);
        return make_envelope<wire::Digest>([&](wire::Digest::Builder out) { out.setXxh3(sum); });
      },
  };
}

// The plain TCP stream baseline: accept connections and take what they send into the region's
// memory, walking through all of it, as the engine's writes do: a sink that reused one small
// buffer would receive into the caches, which no transfer into a large region can.
void run_sink(int listen_fd, std::byte* base, uint64_t bytes) {
  for (;;) {
    int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0)
      return;
    std::thread([fd, base, bytes] {
      constexpr uint64_t chunk = 4u << 20;
      uint64_t at = 0;
      for (;;) {
        if (at + chunk > bytes)
          at = 0;
        const ssize_t n = recv(fd, base + at, chunk, 0);
        if (n <= 0)
          break;
        at += static_cast<uint64_t>(n);
      }
      close(fd);
    }).detach();
  }
}

// The GPU region of --gpu-mib, registered as cuda:0; or why there is none.
caf::expected<transport::region_handle> serve_gpu_memory(transport::transfer_engine& engine,
                                                         const transfer_peer_options& opt,
                                                         transport::device_memory& memory) {
  if (opt.gpu_mib == 0)
    return make_error(errc::unavailable, "the transfer peer was started without --gpu-mib");
  if (auto why = engine.cuda_status())
    return why;
  auto m = transport::device_memory::allocate(opt.gpu_mib << 20, 0);
  if (!m)
    return std::move(m.error());
  memory = std::move(*m);
  return engine.register_region(opt.node, memory.data(), memory.size_bytes(),
                                transport::memory_location::cuda(0));
}

} // namespace

int run_transfer_peer(const transfer_peer_options& opt) {
  // First: every thread started from here on runs where this one does.
  if (!opt.cpus.empty()) {
    auto cpus = parse_cpu_list(opt.cpus);
    auto err = cpus ? pin_this_thread(*cpus) : cpus.error();
    if (err) {
      fmt::print(stderr, "transfer-peer: --cpus: {}\n", describe(err));
      return 2;
    }
  }
  auto cpus = allowed_cpus(); // as it is, for the greeting: what the parent prints
  transport::transfer_options topt;
  topt.local_nodes = {opt.node};
  topt.enable_shm = opt.shm;
  topt.enable_tcp = opt.tcp;
  auto engine = transport::transfer_engine::create(topt);
  if (!engine) {
    fmt::print(stderr, "transfer-peer: {}\n", describe(engine.error()));
    return 2;
  }
  auto memory = transport::host_memory::allocate(opt.region_mib << 20);
  if (!memory) {
    fmt::print(stderr, "transfer-peer: {}\n", describe(memory.error()));
    return 2;
  }
  auto region = (*engine)->register_region(opt.node, memory->data(), memory->size_bytes());
  auto sink = transport::tcp::listen_on("127.0.0.1", 0);
  if (!region || !sink) {
    fmt::print(stderr, "transfer-peer: cannot register its region or open its sink\n");
    return 2;
  }
  // Freed when this process ends, as the host region is: only after the parent, the one
  // process that opens it through CUDA IPC, has closed our standard input.
  transport::device_memory gpu_memory;
  auto gpu_region = serve_gpu_memory(**engine, opt, gpu_memory);
  process_actor_system actors{true};
  auto& sys = actors.get();
  auto actor = sys.spawn(transfer_peer, *engine, *region, memory->data(), std::move(gpu_region));
  auto port = sys.middleman().publish(actor, 0, "127.0.0.1");
  if (!port) {
    fmt::print(stderr, "transfer-peer: cannot publish its actor: {}\n", sys.render(port.error()));
    return 2;
  }
  std::thread(run_sink, sink->first, memory->data(), memory->size_bytes()).detach();
  fmt::print("crescent-transfer-peer actor-port={} sink-port={} pid={} cpus={}\n", *port,
             sink->second, getpid(), cpus ? to_text(*cpus) : "unknown");
  std::fflush(stdout);
  // Serve until the parent goes away: its end of our standard input closes.
  char c;
  while (::read(STDIN_FILENO, &c, 1) > 0) {
  }
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
  return 0;
}

} // namespace crescent::bench
