#include "apps/replay/real_time.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "actors/common/bounded_shutdown.hpp"
#include "apps/replay/replay_driver.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>

namespace crescent::replay {

namespace {

// Every actor has terminated by then: what is left is CAF's own teardown (milliseconds).
constexpr auto actor_system_end_limit = std::chrono::seconds(20);

} // namespace

caf::expected<real_time_run>
replay_in_real_time(const cluster_config& cfg, std::vector<synthetic_request> requests,
                    std::FILE* progress, const std::function<void()>& started,
                    const std::function<void(caf::actor_system&, cluster&)>& finished) {
  owned_actor_system owned;
  owned.config = std::make_unique<caf::actor_system_config>();
  setup_actor_system(*owned.config, spans_processes(cfg));
  owned.system = std::make_unique<caf::actor_system>(*owned.config);
  auto& sys = *owned.system;
  // Every way out ends the system within the limit (bounded_shutdown.hpp says why).
  struct ender {
    owned_actor_system& owned;
    ~ender() { end_actor_system(std::move(owned), actor_system_end_limit); }
  } end_at_return{owned};
  auto cl = cluster::start(sys, cfg);
  if (!cl)
    return make_error(errc::bad_config, "cluster bring-up: " + describe(cl.error()));
  auto results = std::make_shared<std::vector<request_result>>();
  if (started)
    started();
  const auto start_time = std::chrono::steady_clock::now();
  caf::error err;
  {
    auto driver = spawn_replay_driver(sys, **cl, std::move(requests), results, {progress});
    caf::scoped_actor self{sys};
    self->request(driver, caf::infinite, run_atom::value)
        .receive([] {}, [&](caf::error& e) { err = std::move(e); });
  }
  real_time_run out;
  out.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  out.moved = (*cl)->transfer().metrics();
  if (finished && !err)
    finished(sys, **cl);
  (*cl)->stop();
  sys.await_all_actors_done();
  cl->reset();
  if (err)
    return make_error(errc::internal, "replay: " + describe(err));
  out.results = std::move(*results);
  return out;
}

} // namespace crescent::replay
