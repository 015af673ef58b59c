// The join of a hosted node through its agent, on the deterministic scheduler: the terms are
// checked field by field, a refused join changes nothing, an accepted one answers with the
// node's actors and how to reach its memory, and a node serves one cluster only.
#include "actors/cluster/node_spawn.hpp"
#include "actors/node_agent/node_agent.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/cluster.capnp.h"
#include "messages/schema/conductor.capnp.h"
#include "messages/wire_version.hpp"
#include "support/test_cluster.hpp"
#include "transport/peer_wire.hpp"

#include <caf/actor_cast.hpp>

namespace crescent::testing {
namespace {

struct join_answer {
  caf::error err;
  typed_envelope<wire::NodeWelcome> welcome;
  caf::actor owner;
  std::vector<caf::actor> decode;
  std::vector<caf::actor> prefill;
};

struct terms {
  uint32_t wire = wire_version;
  uint32_t node = 1;
  uint64_t fingerprint = 0;
  uint64_t page_bytes = 0;
  uint32_t first_decode = 0;
  uint32_t decode = 1;
};

class node_join : public ::testing::Test {
 protected:
  node_join() : h(small_cluster(1, 1)) {
    const auto& cfg = h.cl->config();
    // This process plays both sides: "main" serves node 0, the hosted node's engine node 1.
    transport::transfer_options mopt;
    mopt.local_nodes = {0};
    mopt.enable_tcp = false;
    main_engine = *transport::transfer_engine::create(mopt);
    transport::transfer_options nopt;
    nopt.local_nodes = {1};
    nopt.enable_tcp = false;
    auto engine =
        std::shared_ptr<transport::transfer_engine>{*transport::transfer_engine::create(nopt)};
    hosted.node = 1;
    hosted.model_fingerprint = cfg.model.fingerprint();
    hosted.page_bytes = cfg.model.page_bytes();
    hosted.first_decode_instance = 0;
    hosted.cluster_decode_instances = 1;
    hosted.transfer = engine;
    hosted.dir = std::make_shared<directory_cell>();
    hosted.owner =
        *spawn_node_owner(h.sys, cfg, 1, engine, "", store_master_actor{}, engine->self_info());
    hosted.decode.push_back(
        *spawn_decode_instance(h.sys, cfg, 0, 1, engine, std::make_shared<directory_cell>()));
    agent = spawn_hosted_node_agent(h.sys, std::chrono::milliseconds(100), hosted);
    good.fingerprint = hosted.model_fingerprint;
    good.page_bytes = hosted.page_bytes;
  }

  ~node_join() override {
    caf::anon_send_exit(agent, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(hosted.owner, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(hosted.decode[0], caf::exit_reason::user_shutdown);
  }

  typed_envelope<wire::NodeJoin> join_msg(const terms& t) {
    return make_envelope<wire::NodeJoin>([&](wire::NodeJoin::Builder out) {
      out.setWireVersion(t.wire);
      out.setNode(t.node);
      out.setModelFingerprint(t.fingerprint);
      out.setPageBytes(t.page_bytes);
      out.setFirstDecodeInstance(t.first_decode);
      out.setDecodeInstances(t.decode);
      transport::to_wire(main_engine->self_info(), out.initPeer());
    });
  }

  join_answer join(const node_agent_actor& to, typed_envelope<wire::NodeJoin> msg,
                   bool with_handles = true) {
    auto result = std::make_shared<std::optional<join_answer>>();
    auto conductor =
        with_handles ? caf::actor_cast<caf::actor>(h.cl->dir().conductor) : caf::actor{};
    auto master = caf::actor_cast<caf::actor>(h.cl->dir().store_master);
    h.sys.spawn([=](caf::event_based_actor* client) {
      client->request(to, caf::infinite, join_atom::value, msg, conductor, master)
          .then(
              [=](typed_envelope<wire::NodeWelcome>& w, caf::actor& owner,
                  std::vector<caf::actor>& decode, std::vector<caf::actor>& prefill) {
                *result = join_answer{
                    {}, std::move(w), std::move(owner), std::move(decode), std::move(prefill)};
              },
              [=](caf::error& err) {
                *result = join_answer{std::move(err), {}, {}, {}, {}};
              });
    });
    EXPECT_TRUE(h.run_until([&] { return result->has_value(); }));
    return result->value_or(join_answer{make_error(errc::timeout, "no answer"), {}, {}, {}, {}});
  }

  std::string refusal(terms t) {
    auto a = join(agent, join_msg(t));
    EXPECT_TRUE(a.err) << "accepted";
    return describe(a.err);
  }

  cluster_harness h;
  std::shared_ptr<transport::transfer_engine> main_engine;
  hosted_node hosted;
  node_agent_actor agent;
  terms good;
};

TEST_F(node_join, an_agent_of_an_embedded_node_takes_no_join) {
  auto a = join(h.cl->dir().node_agents[0], join_msg(good));
  EXPECT_TRUE(is(a.err, errc::invalid_argument)) << describe(a.err);
  EXPECT_NE(describe(a.err).find("runs inside its cluster's process"), std::string::npos);
}

TEST_F(node_join, terms_that_differ_are_refused_with_what_differs) {
  auto t = good;
  t.node = 2;
  EXPECT_NE(refusal(t).find("node here is 2, this node process has 1"), std::string::npos);
  t = good;
  t.fingerprint ^= 1;
  EXPECT_NE(refusal(t).find("model fingerprint"), std::string::npos);
  t = good;
  t.page_bytes += 64;
  EXPECT_NE(refusal(t).find("KV page size"), std::string::npos);
  t = good;
  t.first_decode = 3;
  EXPECT_NE(refusal(t).find("first decode instance"), std::string::npos);
  t = good;
  t.decode = 2;
  EXPECT_NE(refusal(t).find("decode instance count"), std::string::npos);
  // A main process of a build before 128-bit block keys sends no version (it reads as 0).
  t = good;
  t.wire = 0;
  EXPECT_NE(refusal(t).find("speaks wire version 0, this node process 1"), std::string::npos)
      << refusal(t);
  // Another schema under the join's type (as a process of another build might send), and a join
  // without the conductor.
  auto a = join(agent, typed_envelope<wire::NodeJoin>::retype(
                           make_envelope<wire::Ack>([](wire::Ack::Builder) {})));
  EXPECT_TRUE(is(a.err, errc::wrong_message_type)) << describe(a.err);
  a = join(agent, join_msg(good), false);
  EXPECT_NE(describe(a.err).find("needs the conductor"), std::string::npos);
  // None of it joined: the right terms still do.
  EXPECT_FALSE(join(agent, join_msg(good)).err);
}

TEST_F(node_join, an_accepted_join_answers_with_the_node_and_a_second_is_refused) {
  auto a = join(agent, join_msg(good));
  ASSERT_FALSE(a.err) << describe(a.err);
  EXPECT_EQ(a.owner, caf::actor_cast<caf::actor>(hosted.owner));
  ASSERT_EQ(a.decode.size(), 1u);
  EXPECT_EQ(a.decode[0], caf::actor_cast<caf::actor>(hosted.decode[0]));
  auto w = read_as<wire::NodeWelcome>(a.welcome, [](wire::NodeWelcome::Reader in) {
    EXPECT_EQ(in.getWireVersion(), wire_version);
    auto peer = transport::from_wire(in.getPeer());
    return std::make_pair(in.getNode(), peer ? peer->nodes : std::vector<uint32_t>{});
  });
  ASSERT_TRUE(w);
  EXPECT_EQ(w->first, 1u);
  EXPECT_EQ(w->second, std::vector<uint32_t>{1});
  // The hosted engine learned the main process: node 0 is reachable from it now.
  EXPECT_FALSE(hosted.transfer->paths(0).empty());
  EXPECT_TRUE(a.prefill.empty());
  EXPECT_EQ(hosted.dir->current().conductor, h.cl->dir().conductor);
  EXPECT_EQ(hosted.dir->current().store_master, h.cl->dir().store_master);
  auto again = join(agent, join_msg(good));
  EXPECT_TRUE(is(again.err, errc::already_exists)) << describe(again.err);
}

TEST_F(node_join, the_directory_comes_after_the_join_and_again_at_each_rejoin) {
  auto directory = [&](uint32_t decode_count) {
    return make_envelope<wire::ClusterDirectory>([&](wire::ClusterDirectory::Builder out) {
      auto peers = out.initPeers(2);
      transport::to_wire(main_engine->self_info(), peers[0]);
      transport::to_wire(hosted.transfer->self_info(), peers[1]); // its own: skipped
      out.setDecodeInstances(decode_count);
    });
  };
  // The cluster's one decode instance is this node's own.
  std::vector<caf::actor> decode{caf::actor_cast<caf::actor>(hosted.decode[0])};
  const std::vector<caf::actor> prefill; // the cluster's prefill instances: none of this test's
  auto err = h.ask_void(agent, directory_atom::value, directory(1), decode, prefill);
  EXPECT_NE(describe(err).find("after its join"), std::string::npos) << describe(err);
  ASSERT_FALSE(join(agent, join_msg(good)).err);
  err = h.ask_void(agent, directory_atom::value, directory(2), decode, prefill);
  EXPECT_NE(describe(err).find("decode workers are missing"), std::string::npos) << describe(err);
  err = h.ask_void(agent, directory_atom::value, directory(1), std::vector<caf::actor>(1), prefill);
  EXPECT_NE(describe(err).find("decode workers are missing"), std::string::npos) << describe(err);
  const std::vector<caf::actor> one_prefill{caf::actor_cast<caf::actor>(h.cl->dir().prefill[0])};
  err = h.ask_void(agent, directory_atom::value, directory(1), decode, one_prefill);
  EXPECT_NE(describe(err).find("prefill workers are missing"), std::string::npos) << describe(err);
  std::vector<caf::actor> elsewhere{caf::actor_cast<caf::actor>(h.cl->dir().decode[0])};
  err = h.ask_void(agent, directory_atom::value, directory(1), elsewhere, prefill);
  EXPECT_NE(describe(err).find("misplaces this node's decode workers"), std::string::npos)
      << describe(err);
  EXPECT_FALSE(h.ask_void(agent, directory_atom::value, directory(1), decode, prefill));
  ASSERT_EQ(hosted.dir->current().decode.size(), 1u);
  EXPECT_EQ(hosted.dir->current().decode[0], hosted.decode[0]);
  // Another node rejoined: the directory comes again, and replaces the workers it names.
  const auto published = hosted.dir->snapshots();
  EXPECT_FALSE(h.ask_void(agent, directory_atom::value, directory(1), decode, prefill));
  EXPECT_EQ(hosted.dir->snapshots(), published + 1);
  EXPECT_EQ(hosted.dir->current().decode.size(), 1u);
}

} // namespace
} // namespace crescent::testing

namespace crescent::testing {
namespace {

uint32_t live_nodes(cluster_harness& h) {
  auto stats = h.ask(h.cl->dir().conductor, stats_atom::value);
  EXPECT_TRUE(stats);
  auto live = read_as<wire::ConductorStats>(
      *stats, [](wire::ConductorStats::Reader in) { return in.getLiveNodes(); });
  return live ? *live : 0;
}

TEST(conductor_liveness, a_node_whose_agent_is_gone_leaves_at_once) {
  cluster_harness h{small_cluster(1, 2)};
  ASSERT_EQ(live_nodes(h), 3u);
  caf::anon_send_exit(h.cl->dir().node_agents[2], caf::exit_reason::kill);
  h.sched.run();
  // No virtual time passed: the heartbeat timeout did not do this, the down message did.
  EXPECT_EQ(live_nodes(h), 2u);
}

TEST(conductor_liveness, a_gone_node_is_placed_on_again_once_bring_up_hands_over_its_new_agent) {
  cluster_harness h{small_cluster(1, 2)};
  const auto conductor = h.cl->dir().conductor;
  auto agent = spawn_node_agent(h.sys, 2, std::chrono::milliseconds(1000), {},
                                directory_ref::of(h.cl->dir()));
  const auto fresh = caf::actor_cast<caf::actor>(agent);
  // Not while the node's agent lives, nor for a node the cluster lacks, nor without an agent.
  auto err = h.ask_void(conductor, watch_atom::value, uint32_t{2}, fresh);
  EXPECT_TRUE(is(err, errc::already_exists)) << describe(err);
  err = h.ask_void(conductor, watch_atom::value, uint32_t{3}, fresh);
  EXPECT_TRUE(is(err, errc::invalid_argument)) << describe(err);
  caf::anon_send_exit(h.cl->dir().node_agents[2], caf::exit_reason::kill);
  h.sched.run();
  ASSERT_EQ(live_nodes(h), 2u);
  err = h.ask_void(conductor, watch_atom::value, uint32_t{2}, caf::actor{});
  EXPECT_TRUE(is(err, errc::invalid_argument)) << describe(err);
  ASSERT_FALSE(h.ask_void(conductor, watch_atom::value, uint32_t{2}, fresh));
  caf::anon_send(agent, start_atom::value);
  // Live from the next liveness check, and watched: its end takes the node out again.
  EXPECT_TRUE(h.run_until([&] { return live_nodes(h) == 3; }));
  caf::anon_send_exit(agent, caf::exit_reason::kill);
  h.sched.run();
  EXPECT_EQ(live_nodes(h), 2u);
}

TEST(conductor_liveness, only_a_nodes_own_agent_speaks_for_it) {
  cluster_harness h{small_cluster(1, 2)};
  auto beat = make_envelope<wire::Heartbeat>([](wire::Heartbeat::Builder out) {
    out.setNode(2);
    out.setSequence(1);
  });
  auto err = h.ask_void(h.cl->dir().conductor, heartbeat_atom::value, beat);
  EXPECT_TRUE(is(err, errc::access_denied)) << describe(err);
  // Nor can bring-up's list of agents be replaced.
  caf::anon_send(h.cl->dir().conductor, watch_atom::value, std::vector<caf::actor>(3));
  caf::anon_send_exit(h.cl->dir().node_agents[2], caf::exit_reason::kill);
  h.sched.run();
  EXPECT_EQ(live_nodes(h), 2u);
}

} // namespace
} // namespace crescent::testing
