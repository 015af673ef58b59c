#include "apps/up/settled_audit.hpp"

#include "messages/atoms.hpp"
#include "messages/checked_read.hpp"
#include "messages/errors.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/store.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/scoped_actor.hpp>
#include <fmt/format.h>

#include <optional>
#include <thread>

namespace crescent::up {

caf::expected<uint32_t> reservations_in(const typed_envelope<wire::WorkerStats>& worker_stats) {
  return read_as<wire::WorkerStats>(worker_stats, [](wire::WorkerStats::Reader in) {
    return in.getQueuedJobs() + in.getActiveRequests();
  });
}

caf::expected<uint64_t> leased_blocks_in(const typed_envelope<wire::StoreStats>& store_stats) {
  return read_as<wire::StoreStats>(
      store_stats, [](wire::StoreStats::Reader in) { return in.getLeasedBlocks(); });
}

caf::expected<replica_losses>
replica_losses_in(const typed_envelope<wire::StoreStats>& store_stats) {
  return read_as<wire::StoreStats>(store_stats, [](wire::StoreStats::Reader in) {
    return replica_losses{in.getLostReplicatedBlocks(), in.getNodesLost()};
  });
}

caf::expected<uint32_t> live_nodes_in(const typed_envelope<wire::ConductorStats>& conductor_stats) {
  return read_as<wire::ConductorStats>(
      conductor_stats, [](wire::ConductorStats::Reader in) { return in.getLiveNodes(); });
}

caf::expected<uint64_t>
requests_in_flight_in(const typed_envelope<wire::ConductorStats>& conductor_stats) {
  return read_as<wire::ConductorStats>(
      conductor_stats, [](wire::ConductorStats::Reader in) { return in.getRequestsInFlight(); });
}

namespace {

constexpr auto ask_timeout = std::chrono::seconds(2);
constexpr auto poll_interval = std::chrono::milliseconds(200);

template <class Handle>
std::optional<reply_t<Handle, stats_atom>> ask_stats(caf::actor_system& sys, const Handle& who) {
  std::optional<reply_t<Handle, stats_atom>> got;
  caf::scoped_actor self{sys};
  self->request(who, ask_timeout, stats_atom::value)
      .receive([&](const reply_t<Handle, stats_atom>& e) { got = e; }, [](caf::error&) {});
  return got;
}

// What `read` makes of the stats that `ask` got from `who`; an error when it does not answer.
template <class Ask, class Handle, class Read>
auto asked(const Ask& ask, const Handle& who, Read read) {
  auto stats = ask(who);
  return stats ? read(*stats) : decltype(read(*stats)){make_error(errc::not_found, "no answer")};
}

} // namespace

std::vector<std::string> audit_once(const cluster& cl, const std::set<uint32_t>& killed,
                                    const stats_asker& ask) {
  std::vector<std::string> out;
  const auto& dir = cl.dir();
  for (size_t i = 0; i < dir.decode.size(); ++i) {
    if (killed.count(dir.decode_node[i]) != 0)
      continue;
    auto held = asked(ask.decode, dir.decode[i], reservations_in);
    if (!held)
      out.push_back(fmt::format("decode instance {} did not answer for its stats: {}", i,
                                describe(held.error())));
    else if (*held != 0)
      out.push_back(fmt::format("decode instance {} still holds {} reservations after the last "
                                "request ended",
                                i, *held));
  }
  auto leased = asked(ask.store, dir.store_master, leased_blocks_in);
  if (!leased)
    out.push_back("the store master did not answer for its stats: " + describe(leased.error()));
  else if (*leased != 0)
    out.push_back(fmt::format("the store master still holds read leases on {} blocks after the "
                              "last request ended",
                              *leased));
  auto losses = asked(ask.store, dir.store_master, replica_losses_in);
  if (losses && losses->nodes_lost <= 1 && losses->lost_replicated_blocks != 0)
    out.push_back(fmt::format("{} blocks acknowledged on two or more nodes were lost while {} "
                              "node(s) were lost",
                              losses->lost_replicated_blocks, losses->nodes_lost));
  auto live = asked(ask.conductor, dir.conductor, live_nodes_in);
  const auto expected = static_cast<uint32_t>(cl.config().nodes.size() - killed.size());
  if (!live)
    out.push_back("the conductor did not answer for its stats: " + describe(live.error()));
  else if (*live != expected)
    out.push_back(fmt::format("the conductor counts {} live nodes after the faults stopped; {} "
                              "were not killed",
                              *live, expected));
  if (auto placed = asked(ask.conductor, dir.conductor, requests_in_flight_in);
      placed && *placed != 0)
    out.push_back(fmt::format("the conductor still counts {} requests in flight after the last "
                              "request ended",
                              *placed));
  return out;
}

std::vector<std::string> audit_settled(caf::actor_system& sys, cluster& cl,
                                       const std::function<std::set<uint32_t>()>& lost,
                                       std::chrono::milliseconds within) {
  const auto until = std::chrono::steady_clock::now() + within;
  for (;;) {
    auto violations = audit_once(
        cl, lost(), stats_asker::of([&](const auto& who) { return ask_stats(sys, who); }));
    if (violations.empty() || std::chrono::steady_clock::now() >= until)
      return violations;
    std::this_thread::sleep_for(poll_interval); // real time: the cluster settles meanwhile
  }
}

} // namespace crescent::up
