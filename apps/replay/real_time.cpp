#include "apps/replay/real_time.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/common/actor_system_setup.hpp"
#include "apps/replay/replay_driver.hpp"
#include "messages/errors.hpp"

#include <caf/actor_system.hpp>
#include <caf/scoped_actor.hpp>

#include <chrono>

namespace crescent::replay {

caf::expected<real_time_run>
replay_in_real_time(const cluster_config& cfg, std::vector<synthetic_request> requests,
                    std::FILE* progress, const std::function<void(cluster&)>& started,
                    const std::function<void(caf::actor_system&, cluster&)>& finished,
                    bool sequential) {
  process_actor_system actors{spans_processes(cfg), connection_liveness_of(cfg)};
  auto& sys = actors.get();
  auto cl = cluster::start(sys, cfg);
  if (!cl)
    return make_error(errc::bad_config, "cluster bring-up: " + describe(cl.error()));
  auto results = std::make_shared<std::vector<request_result>>();
  if (started)
    started(**cl);
  const auto start_time = std::chrono::steady_clock::now();
  caf::error err;
  {
    replay_options options;
    options.progress = progress;
    options.sequential = sequential;
    auto driver = spawn_replay_driver(sys, **cl, std::move(requests), results, options);
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
