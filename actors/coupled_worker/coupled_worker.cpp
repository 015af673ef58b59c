#include "actors/coupled_worker/coupled_worker.hpp"

#include "actors/common/spawn_placement.hpp"
#include "actors/coupled_worker/coupled_state.hpp"

#include <caf/stateful_actor.hpp>

namespace crescent {

namespace {

// Every page of the pool, once: the instance's memory is its own, so pages are numbered and
// handed to sequences by the page cache, not allocated per request.
struct mapped_pages {
  std::vector<transport::region_handle> slots;
  std::vector<std::byte*> memory;
};

caf::expected<mapped_pages> map_pages(storage::dram_pool& pool) {
  mapped_pages out;
  out.slots = pool.allocate(pool.capacity_slots());
  for (const auto& slot : out.slots) {
    auto mem = pool.slot_memory(slot);
    if (!mem)
      return std::move(mem.error());
    out.memory.push_back(mem->data());
  }
  return out;
}

coupled_worker_actor::behavior_type coupled_worker(coupled_ptr self, coupled_worker_options options,
                                                   coupled_worker_parts parts, mapped_pages pages) {
  lower_compute_thread_priority(options.own_thread);
  auto& st = self->state;
  st.options = options;
  st.parts = std::move(parts);
  st.page_slots = std::move(pages.slots);
  st.page_memory = std::move(pages.memory);
  st.cache = std::make_unique<page_cache>(static_cast<uint32_t>(st.page_memory.size()),
                                          options.prefix_caching);
  keep_serving_on_errors(self);
  self->set_down_handler([=](caf::down_msg& down) {
    std::vector<uint64_t> orphans;
    for (const auto& s : self->state.waiting)
      if (s.requester.address() == down.source)
        orphans.push_back(s.request_id);
    for (const auto& [id, s] : self->state.running)
      if (s.requester.address() == down.source)
        orphans.push_back(id);
    for (auto id : orphans)
      drop_request(self, id);
    wake(self);
  });
  return {
      [=](prefill_atom, const typed_envelope<wire::CoupledJob>& msg) {
        return on_coupled_job(self, msg);
      },
      [=](release_atom, const typed_envelope<wire::ReleaseRequest>& msg) {
        return on_release(self, msg);
      },
      [=](probe_atom, const typed_envelope<wire::JobProbe>& msg) { return on_probe(self, msg); },
      [=](stats_atom) { return make_stats(self); },
      [=](step_atom) {
        if (!refuse_unless_self_sent(self, "step"))
          on_step(self);
      },
  };
}

} // namespace

caf::expected<coupled_worker_actor> spawn_coupled_worker(caf::actor_system& sys,
                                                         coupled_worker_options options,
                                                         coupled_worker_parts parts) {
  if (parts.kv_pages->used_slots() != 0 || parts.kv_pages->capacity_slots() > page_cache::pages_max)
    return make_error(errc::invalid_argument,
                      "a coupled instance needs a KV pool of its own, of at most 2^24 pages");
  auto pages = map_pages(*parts.kv_pages);
  if (!pages)
    return std::move(pages.error());
  return spawn_placed(sys, options.own_thread, coupled_worker, options, std::move(parts),
                      std::move(*pages));
}

} // namespace crescent
