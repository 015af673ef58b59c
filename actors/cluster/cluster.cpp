#include "actors/cluster/cluster.hpp"

#include "actors/block_owner/block_owner.hpp"
#include "actors/cluster/conductor_model.hpp"
#include "actors/cluster/node_spawn.hpp"
#include "actors/conductor/conductor.hpp"
#include "actors/decode_worker/decode_worker.hpp"
#include "actors/node_agent/node_agent.hpp"
#include "actors/prefill_worker/prefill_worker.hpp"
#include "actors/store_master/store_master.hpp"
#include "gpu/modeled_profile.hpp"
#include "messages/errors.hpp"

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

namespace crescent {

connection_liveness connection_liveness_of(const cluster_config& cfg) {
  return {std::chrono::milliseconds(cfg.connection_heartbeat_ms),
          std::chrono::milliseconds(cfg.connection_timeout_ms)};
}

namespace {

caf::expected<std::string> make_temp_dir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "crescent-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr)
    return make_error(errc::io_error, "cannot create a temporary directory for block metadata");
  return pattern;
}

template <class Handle>
caf::strong_actor_ptr ptr(const Handle& h) {
  return caf::actor_cast<caf::strong_actor_ptr>(h);
}

} // namespace

cluster::cluster(caf::actor_system& sys, cluster_config cfg)
    : sys_(sys), cfg_(std::move(cfg)), cell_(std::make_shared<directory_cell>()) {}

cluster::~cluster() {
  stop();
  if (!temp_dir_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp_dir_, ignored);
  }
}

caf::expected<std::unique_ptr<cluster>> cluster::start(caf::actor_system& sys,
                                                       const cluster_config& cfg) {
  if (auto err = validate(cfg))
    return err;
  if (cfg.engine.kind == gpu::engine_kind::modeled && !cfg.simulated_time)
    return make_error(errc::bad_config, "engine.kind: the modeled engine computes nothing and runs "
                                        "only in simulated time (crescent replay --sim)");
  std::unique_ptr<cluster> c{new cluster(sys, cfg)};
  if (auto err = c->create_transfer())
    return err;
  const auto nodes = static_cast<uint32_t>(cfg.nodes.size());
  for (uint32_t n = 0; n < nodes; ++n) {
    for (uint32_t i = 0; i < cfg.nodes[n].prefill_instances; ++i)
      c->dir_.prefill_node.push_back(n);
    for (uint32_t i = 0; i < cfg.nodes[n].decode_instances; ++i)
      c->dir_.decode_node.push_back(n);
    for (uint32_t i = 0; i < cfg.nodes[n].coupled_instances; ++i)
      c->dir_.coupled_node.push_back(n);
  }
  c->dir_.coupled.resize(c->dir_.coupled_node.size());
  c->dir_.block_owners.resize(nodes);
  c->dir_.node_agents.resize(nodes);
  c->dir_.decode.resize(c->dir_.decode_node.size());
  c->dir_.prefill.resize(c->dir_.prefill_node.size());
  if (auto err = c->spawn_storage())
    return err;
  if (auto err = c->publish())
    return err;
  conductor_options copt;
  copt.nodes = nodes;
  // A coupled instance is a prefill and a decode instance in one, to the conductor.
  const bool coupled = is_coupled(cfg);
  copt.coupled = coupled;
  copt.prefill_node = coupled ? c->dir_.coupled_node : c->dir_.prefill_node;
  copt.decode_node = coupled ? c->dir_.coupled_node : c->dir_.decode_node;
  copt.prefill_queue_max = cfg.prefill.queue_jobs_max;
  copt.prefill_group = cfg.prefill.group_instances;
  copt.heartbeat_timeout = std::chrono::milliseconds(cfg.conductor.heartbeat_timeout_ms);
  copt.liveness_check = std::chrono::milliseconds(cfg.heartbeat_interval_ms);
  copt.policy = cfg.conductor.policy;
  copt.admission = cfg.conductor.admission;
  copt.kvcache_balancing_threshold = cfg.conductor.kvcache_balancing_threshold;
  copt.decode_tbt_slack = cfg.conductor.decode_tbt_slack;
  copt.ssd_index = cfg.conductor.ssd_index;
  copt.slo.ttft_ns = uint64_t{cfg.conductor.slo_ttft_ms} * 1'000'000;
  copt.slo.tbt_ns = uint64_t{cfg.conductor.slo_tbt_ms} * 1'000'000;
  copt.seed = cfg.conductor.seed;
  copt.block_tokens = cfg.model.block_tokens;
  copt.decode_capacity_tokens = (coupled ? coupled_kv_bytes_of(cfg) : decode_kv_bytes_of(cfg)) /
                                cfg.model.page_bytes() * cfg.model.block_tokens;
  auto model = conductor_time_model(cfg);
  if (!model)
    return std::move(model.error());
  copt.model = std::move(*model);
  copt.store_master = caf::actor_cast<caf::actor_addr>(c->dir_.store_master);
  copt.dir = c->cell_;
  c->dir_.conductor = spawn_conductor(sys, std::move(copt));
  c->all_.push_back(ptr(c->dir_.conductor));
  if (auto err = c->publish())
    return err;
  if (auto err = c->spawn_workers())
    return err;
  if (auto err = c->publish())
    return err;
  if (auto err = c->join_hosted_nodes())
    return err;
  if (auto err = c->spawn_node_agents())
    return err;
  c->start_rejoin_watch();
  return c;
}

caf::error cluster::create_transfer() {
  if (cfg_.engine.kind == gpu::engine_kind::modeled) {
    // Simulated time: bytes (stand-ins) move in-process, and every transfer takes its time on
    // the profile's links, by the actor system's clock.
    auto& clock = sys_.clock();
    links_ = std::make_shared<transport::modeled_links>(
        static_cast<uint32_t>(cfg_.nodes.size()), link_profile_of(cfg_), [&clock] {
          return std::chrono::duration_cast<std::chrono::nanoseconds>(
                     clock.now().time_since_epoch())
              .count();
        });
    auto transfer = transport::transfer_engine::create_modeled(cfg_.access_key_seed, links_);
    if (!transfer)
      return std::move(transfer.error());
    transfer_ = std::move(*transfer);
    if (const auto n = cfg_.engine.profile->shared_cores; n > 0)
      cores_ = std::make_shared<gpu::shared_cores>(n, [&clock] {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(clock.now().time_since_epoch())
            .count();
      });
    return caf::none;
  }
  if (!spans_processes(cfg_)) {
    // One process: every node's regions are this engine's own.
    auto transfer = transport::transfer_engine::create_local(cfg_.access_key_seed);
    if (!transfer)
      return std::move(transfer.error());
    transfer_ = std::move(*transfer);
    return caf::none;
  }
  std::vector<uint32_t> local;
  for (uint32_t n = 0; n < cfg_.nodes.size(); ++n)
    if (!cfg_.nodes[n].hosted_elsewhere())
      local.push_back(n);
  auto transfer = transport::transfer_engine::create(
      transfer_options_for(cfg_, std::move(local), cfg_.transfer.bind_host));
  if (!transfer)
    return std::move(transfer.error());
  transfer_ = std::move(*transfer);
  return caf::none;
}

caf::error cluster::spawn_storage() {
  std::string path = cfg_.store.db_path;
  if (path.empty()) {
    auto tmp = make_temp_dir();
    if (!tmp)
      return std::move(tmp.error());
    temp_dir_ = *tmp;
    path = temp_dir_ + "/metadata";
  }
  std::string ssd_base = cfg_.store.ssd_dir.empty() ? path + "-ssd" : cfg_.store.ssd_dir;
  storage::object_options oopt;
  oopt.sync_commits = cfg_.store.sync_commits;
  oopt.nodes = static_cast<uint32_t>(cfg_.nodes.size());
  auto objects = storage::object_store::open(path, oopt);
  if (!objects)
    return std::move(objects.error());
  // The master first: owners report to it; it takes them from the directory at start.
  store_master_options mopt;
  mopt.nodes = static_cast<uint32_t>(cfg_.nodes.size());
  mopt.put_timeout = std::chrono::milliseconds(cfg_.pool.put_timeout_ms);
  mopt.lease_ttl = std::chrono::milliseconds(cfg_.pool.lease_ttl_ms);
  mopt.node_timeout = std::chrono::milliseconds(cfg_.pool.node_timeout_ms);
  mopt.sweep = std::chrono::milliseconds(cfg_.pool.sweep_ms);
  // One seed for the cluster's randomness (access keys, random placement): a replay's --seed.
  if (cfg_.access_key_seed != 0)
    mopt.placement_seed = cfg_.access_key_seed;
  mopt.own_thread = own_threads(cfg_);
  dir_.store_master = spawn_store_master(sys_, mopt, std::move(*objects), cell_);
  all_.push_back(ptr(dir_.store_master));
  ssd_base_ = std::move(ssd_base);
  for (uint32_t n = 0; n < cfg_.nodes.size(); ++n)
    if (!cfg_.nodes[n].hosted_elsewhere()) // else its process runs the owner; the join brings it
      if (auto err = spawn_owner(n))
        return err;
  return caf::none;
}

caf::error cluster::spawn_owner(uint32_t n) {
  auto owner = spawn_node_owner(sys_, cfg_, n, transfer_, ssd_base_ + "/node-" + std::to_string(n),
                                dir_.store_master, std::nullopt, links_);
  if (!owner)
    return std::move(owner.error());
  dir_.block_owners[n] = std::move(*owner);
  all_.push_back(ptr(dir_.block_owners[n]));
  return caf::none;
}

caf::error cluster::spawn_workers(std::optional<uint32_t> only) {
  // This process's instances, by cluster-wide index; a hosted node's come with its join.
  auto spawn_local = [&](const std::vector<uint32_t>& node_of, auto& handles,
                         auto spawn) -> caf::error {
    for (uint32_t i = 0; i < node_of.size(); ++i) {
      if (cfg_.nodes[node_of[i]].hosted_elsewhere() || (only && node_of[i] != *only))
        continue;
      auto worker = spawn(sys_, cfg_, i, node_of[i], transfer_, cell_, cores_);
      if (!worker)
        return std::move(worker.error());
      handles[i] = std::move(*worker);
      all_.push_back(ptr(handles[i]));
    }
    return caf::none;
  };
  if (auto err = spawn_local(dir_.prefill_node, dir_.prefill, spawn_prefill_instance))
    return err;
  if (auto err = spawn_local(dir_.coupled_node, dir_.coupled, spawn_coupled_instance))
    return err;
  return spawn_local(dir_.decode_node, dir_.decode, spawn_decode_instance);
}

caf::error cluster::publish() {
  if (auto err = cell_->publish(dir_))
    return err;
  std::lock_guard guard{published_mutex_};
  if (on_published_)
    on_published_(dir_);
  return caf::none;
}

void cluster::on_published(std::function<void(const directory&)> observer) {
  std::lock_guard guard{published_mutex_};
  on_published_ = std::move(observer);
}

std::vector<caf::strong_actor_ptr> cluster::actors_of(uint32_t n) const {
  std::vector<caf::strong_actor_ptr> out;
  for (const auto& a : actors_on_node(dir_, n))
    out.push_back(ptr(a));
  return out;
}

void cluster::spawn_agent(uint32_t n) {
  dir_.node_agents[n] = spawn_node_agent(
      sys_, n, std::chrono::milliseconds(cfg_.heartbeat_interval_ms), actors_of(n), cell_);
  all_.push_back(ptr(dir_.node_agents[n]));
}

caf::expected<std::vector<caf::actor>> cluster::restart_local_node(uint32_t n) {
  std::lock_guard guard{rejoin_mutex_};
  if (n >= cfg_.nodes.size() || cfg_.nodes[n].hosted_elsewhere())
    return make_error(errc::invalid_argument,
                      "node " + std::to_string(n) + " does not run in this process");
  if (auto err = spawn_owner(n))
    return err;
  if (auto err = spawn_workers(n))
    return err;
  spawn_agent(n);
  if (auto err = publish())
    return err;
  auto out = actors_on_node(dir_, n);
  out.insert(out.begin(), caf::actor_cast<caf::actor>(dir_.node_agents[n]));
  return out;
}

caf::error cluster::spawn_node_agents() {
  for (uint32_t n = 0; n < cfg_.nodes.size(); ++n)
    if (!cfg_.nodes[n].hosted_elsewhere()) // else its agent came with the join
      spawn_agent(n);
  // The directory is complete: from here on actors may read it. The conductor learns whose
  // heartbeats to trust before any agent can send one.
  if (auto err = publish())
    return err;
  caf::scoped_actor bring_up{sys_};
  bring_up->send(dir_.conductor, watch_atom::value, untyped(dir_.node_agents));
  for (auto& agent : dir_.node_agents)
    caf::anon_send(agent, start_atom::value);
  caf::anon_send(dir_.store_master, start_atom::value);
  for (auto& owner : dir_.block_owners)
    caf::anon_send(owner, start_atom::value);
  return caf::none;
}

request_options cluster::request_defaults() const {
  request_options opt;
  opt.block_tokens = cfg_.model.block_tokens;
  opt.vocab = cfg_.model.vocab;
  opt.context_tokens_max = cfg_.model.context_tokens_max;
  opt.root_key = cfg_.model.key_root();
  opt.default_deadline_ms = cfg_.request_deadline_ms;
  opt.retries_max = cfg_.request_retries_max;
  return opt;
}

request_actor cluster::spawn_request() {
  return spawn_request_actor(sys_, request_defaults(), cell_);
}

void cluster::stop() {
  stop_rejoin_watch(); // a rejoin under way ends first: it talks to the actors stopped below
  // Node agents first, so none of them reports its node's actors going down as a failure.
  // Only this process's actors are stopped: a hosted node's agent sees the conductor go and
  // ends its own process.
  for (uint32_t n = 0; n < dir_.node_agents.size(); ++n)
    if (!cfg_.nodes[n].hosted_elsewhere())
      caf::anon_send_exit(dir_.node_agents[n], caf::exit_reason::user_shutdown);
  for (auto& a : all_)
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  all_.clear();
}

} // namespace crescent
