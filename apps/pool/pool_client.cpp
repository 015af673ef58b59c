#include "apps/pool/pool_client.hpp"

#include "actors/common/remote_connect.hpp"
#include "actors/common/timeouts.hpp"
#include "actors/store_master/pool_protocol.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/store.capnp.h"
#include "transport/peer_wire.hpp"

#include <caf/io/middleman.hpp>
#include <caf/scoped_actor.hpp>

#include <poll.h>

namespace crescent::pool {

template <class... Xs>
caf::expected<reply_t<store_master_actor, Xs...>> pool_client::ask_master(const Xs&... xs) {
  using reply = reply_t<store_master_actor, Xs...>;
  caf::expected<reply> result{make_error(errc::timeout, "no answer from the store master")};
  (*self_)
      ->request(master_, control_timeout, xs...)
      .receive([&](reply& e) { result = std::move(e); },
               [&](caf::error& err) { result = std::move(err); });
  return result;
}

caf::error pool_client::ask_master_void(const auto&... xs) {
  caf::error result;
  (*self_)
      ->request(master_, control_timeout, xs...)
      .receive([] {}, [&](caf::error& err) { result = std::move(err); });
  return result;
}

caf::expected<std::unique_ptr<pool_client>>
pool_client::connect(caf::actor_system& sys, const std::string& host, uint16_t port, uint32_t node,
                     std::shared_ptr<get_combiner> combiner,
                     std::shared_ptr<transport::transfer_engine> engine) {
  auto master = remote_actor_of<store_master_actor>(sys, host, port);
  if (!master)
    return make_error(errc::unavailable, "cannot reach the store master at " + host + ":" +
                                             std::to_string(port) + ": " +
                                             sys.render(master.error()));
  if (!engine) {
    transport::transfer_options o;
    o.local_nodes = {node};
    auto made = transport::transfer_engine::create(o);
    if (!made)
      return std::move(made.error());
    engine = std::move(*made);
  }
  std::unique_ptr<pool_client> c{new pool_client};
  c->sys_ = &sys;
  c->master_ = *master;
  c->engine_ = std::move(engine);
  c->node_ = node;
  c->self_ = std::make_unique<caf::scoped_actor>(sys);
  // Alone, a combiner sends each get at once: one code path either way.
  c->combiner_ = combiner ? std::move(combiner) : std::make_shared<get_combiner>();
  return c;
}

caf::error pool_client::await_owners(size_t count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto reply = ask_master(peers_atom::value);
    if (!reply)
      return std::move(reply.error());
    auto peers = read_as<wire::PoolPeers>(*reply, [](wire::PoolPeers::Reader in) {
      std::vector<transport::peer_info> out;
      for (auto p : in.getPeers())
        if (auto info = transport::from_wire(p))
          out.push_back(std::move(*info));
      return out;
    });
    if (!peers)
      return std::move(peers.error());
    if (peers->size() >= count) {
      for (const auto& p : *peers)
        if (auto err = engine_->add_peer(p))
          return err;
      return caf::none;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      std::string why;
      if (auto stats = ask_master(stats_atom::value))
        read_as<wire::StoreStats>(*stats, [&](wire::StoreStats::Reader in) {
          why = "; the master counts " + std::to_string(in.getLiveNodes()) + " live nodes and " +
                std::to_string(in.getBadMessages()) + " refused messages";
          return 0;
        });
      return make_error(errc::timeout, std::to_string(peers->size()) + " of " +
                                           std::to_string(count) + " owners joined" + why);
    }
    poll(nullptr, 0, 20); // owners are starting in other processes
  }
}

caf::expected<pool_stats> pool_client::stats() {
  auto reply = ask_master(stats_atom::value);
  if (!reply)
    return std::move(reply.error());
  return read_as<wire::StoreStats>(*reply, [](wire::StoreStats::Reader in) {
    return pool_stats{in.getCompleteBlocks(), in.getLostBlocks(),     in.getCorruptReports(),
                      in.getLiveNodes(),      in.getSsdWriteErrors(), in.getSsdReadErrors()};
  });
}

caf::error pool_client::await_live_nodes(uint32_t count, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto now = stats();
    if (!now)
      return std::move(now.error());
    if (now->live_nodes == count)
      return caf::none;
    if (std::chrono::steady_clock::now() >= deadline)
      return make_error(errc::timeout, "the master counts " + std::to_string(now->live_nodes) +
                                           " live nodes, not " + std::to_string(count));
    poll(nullptr, 0, 20); // the master notices a death by a missed heartbeat deadline
  }
}

caf::expected<std::vector<block_key>>
pool_client::put(std::span<const block_key> keys,
                 std::span<const std::span<const std::byte>> blocks, uint32_t replicas) {
  std::vector<uint64_t> sizes;
  for (const auto& b : blocks)
    sizes.push_back(b.size());
  const std::vector<uint32_t> positions(keys.size(), 0); // blocks of no particular chain
  auto start = pool_protocol::make_put_start(
      {node_, replicas, wire::ReplicaPlacement::MOST_FREE, keys, sizes, positions});
  auto reply = ask_master(put_start_atom::value, start);
  if (!reply)
    return std::move(reply.error());
  auto slots = pool_protocol::read_put_start_reply(*reply);
  if (!slots || slots->size() != keys.size())
    return make_error(errc::malformed_message, "put_start answer does not match the request");
  // Every replica of every block in one batch.
  pool_batches::replica_writes writes;
  std::vector<size_t> granted; // per added block: its index in keys
  for (size_t i = 0; i < slots->size(); ++i)
    if (!(*slots)[i].replicas.empty()) {
      writes.add(blocks[i], (*slots)[i].replicas);
      granted.push_back(i);
    }
  std::vector<bool> written(slots->size(), false);
  if (!granted.empty()) {
    auto results = run_batch(writes.ops());
    if (!results)
      return std::move(results.error());
    const auto ok = writes.written(pool_batches::errors_of(*results));
    for (size_t b = 0; b < granted.size(); ++b)
      written[granted[b]] = ok[b];
  }
  std::vector<block_key> commit, revoke;
  std::vector<uint64_t> sums;
  for (size_t b = 0; b < granted.size(); ++b) {
    if (written[granted[b]]) {
      commit.push_back(keys[granted[b]]);
      sums.push_back(writes.checksum(b)); // what its replicas were checked against
    } else {
      revoke.push_back(keys[granted[b]]);
    }
  }
  if (!revoke.empty()) {
    [[maybe_unused]] auto err =
        ask_master_void(put_revoke_atom::value, pool_protocol::make_put_revoke(revoke));
  }
  if (commit.empty())
    return commit;
  if (auto err =
          ask_master_void(put_commit_atom::value, pool_protocol::make_put_commit(commit, sums)))
    return err; // not acknowledged: none of them count as stored
  return commit;
}

caf::error pool_client::remove(std::span<const block_key> keys) {
  if (keys.empty() || keys.size() > get_combiner::keys_max)
    return make_error(errc::invalid_argument, "a remove names 1 to 4096 keys");
  return ask_master_void(remove_atom::value, pool_protocol::make_remove(keys));
}

caf::expected<std::vector<bool>> pool_client::get(std::span<const block_key> keys,
                                                  std::span<const std::span<std::byte>> out) {
  if (keys.empty() || keys.size() > get_combiner::keys_max || out.size() != keys.size())
    return make_error(errc::invalid_argument, "a get names 1 to 4096 keys, with a buffer each");
  auto found = combiner_->locate(keys, [this](const typed_envelope<wire::Get>& msg) {
    return ask_master(get_atom::value, msg);
  });
  if (!found)
    return std::move(found.error());
  if (found->size() != keys.size())
    return make_error(errc::malformed_message, "get answer does not match the request");
  auto read = read_blocks(*found, keys, out, pool_batches::read_extent::all);
  if (!read)
    return std::move(read.error());
  std::vector<bool> ok;
  for (const auto& b : *read)
    ok.push_back(b.verified);
  return ok;
}

caf::expected<size_t> pool_client::get_prefix(std::span<const block_key> keys,
                                              std::span<const std::span<std::byte>> out) {
  if (keys.empty() || keys.size() > get_combiner::keys_max || out.size() != keys.size())
    return make_error(errc::invalid_argument, "a get names 1 to 4096 keys, with a buffer each");
  auto reply = ask_master(get_atom::value, pool_protocol::make_get(keys, true));
  if (!reply)
    return std::move(reply.error());
  auto found = pool_protocol::read_get_reply(*reply);
  if (!found)
    return std::move(found.error());
  if (found->size() > keys.size())
    return make_error(errc::malformed_message, "prefix answer longer than the request");
  auto read = read_blocks(*found, keys, out, pool_batches::read_extent::prefix);
  if (!read)
    return std::move(read.error());
  size_t n = 0;
  while (n < read->size() && (*read)[n].verified)
    ++n;
  return n;
}

caf::expected<std::vector<transport::op_result>>
pool_client::run_batch(const std::vector<transport::transfer_op>& ops) {
  auto id = engine_->submit(ops, transport::clock_type::now() + batch_timeout);
  if (!id)
    return std::move(id.error());
  return engine_->wait(*id);
}

caf::expected<std::vector<pool_batches::block_read>>
pool_client::read_blocks(const std::vector<pool_protocol::block_location>& found,
                         std::span<const block_key> keys, std::span<const std::span<std::byte>> out,
                         pool_batches::read_extent extent) {
  auto blocks = pool_batches::reads_of(found, keys, extent);
  // A prefix's reads end at its first block that is not there.
  std::vector<std::span<std::byte>> buffers{out.begin(),
                                            out.begin() + static_cast<ptrdiff_t>(blocks.size())};
  pool_batches::replica_reads reads{std::move(blocks), std::move(buffers),
                                    pool_batches::read_fit::exact, extent};
  for (;;) {
    auto round = reads.next_round();
    if (round.ops.empty())
      return reads.blocks();
    auto results = run_batch(round.ops);
    if (!results)
      return std::move(results.error());
    // A mismatch is a miss for that replica: reported, so that the master drops it.
    for (const auto& bad : reads.settle(round.blocks, pool_batches::errors_of(*results)))
      [[maybe_unused]] auto err = ask_master_void(
          corrupt_atom::value, pool_protocol::make_report_corrupt(bad.key, bad.node));
  }
}

} // namespace crescent::pool
