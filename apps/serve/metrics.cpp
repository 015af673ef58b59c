#include "apps/serve/metrics.hpp"

#include "actors/cluster/cluster.hpp"
#include "actors/common/reply_type.hpp"
#include "messages/checked_read.hpp"
#include "messages/schema/conductor.capnp.h"
#include "messages/schema/store.capnp.h"
#include "messages/schema/worker.capnp.h"

#include <caf/scoped_actor.hpp>
#include <fmt/format.h>

#include <cmath>
#include <optional>

namespace crescent::serve {

namespace {

std::string escape_label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"')
      out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

} // namespace

std::string prom_writer::number(double v) {
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v))
    return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15)
    return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void prom_writer::family(std::string_view name, std::string_view type, std::string_view help) {
  out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
}

std::string prom_writer::series(std::string_view name, const labels& l) {
  std::string out{name};
  if (!l.empty()) {
    out += '{';
    for (size_t i = 0; i < l.size(); ++i)
      out += fmt::format("{}{}=\"{}\"", i == 0 ? "" : ",", l[i].first, escape_label(l[i].second));
    out += '}';
  }
  return out;
}

void prom_writer::sample(std::string_view name, const labels& l, double value) {
  out_ += series(name, l);
  out_ += ' ';
  out_ += number(value);
  out_ += '\n';
}

histogram::histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i])
    ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

void histogram::write(prom_writer& w, std::string_view name, std::string_view help) const {
  w.family(name, "histogram", help);
  const auto bucket = fmt::format("{}_bucket", name);
  uint64_t cumulative = 0;
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    const double le = i < bounds_.size() ? bounds_[i] : INFINITY;
    w.sample(bucket, {{"le", prom_writer::number(le)}}, static_cast<double>(cumulative));
  }
  w.sample(fmt::format("{}_sum", name), {}, sum_);
  w.sample(fmt::format("{}_count", name), {}, static_cast<double>(count_));
}

const char* to_string(door_outcome o) {
  switch (o) {
  case door_outcome::completed:
    return "completed";
  case door_outcome::rejected:
    return "rejected";
  case door_outcome::failed:
    return "failed";
  case door_outcome::cancelled:
    return "cancelled";
  case door_outcome::bad_request:
    return "bad_request";
  case door_outcome::count:
    break;
  }
  return "?";
}

namespace {

// From 1 ms to 60 s: TTFT spans queueing behind long prompts; TBT is milliseconds.
std::vector<double> ttft_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}
std::vector<double> tbt_bounds() {
  return {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2.5};
}

} // namespace

door_metrics::door_metrics() : ttft_(ttft_bounds()), tbt_(tbt_bounds()) {}

void door_metrics::http_answer(std::string_view path, int status) {
  std::lock_guard guard{mu_};
  for (auto& [key, count] : http_)
    if (key.first == path && key.second == status) {
      ++count;
      return;
    }
  http_.push_back({{std::string{path}, status}, 1});
}

void door_metrics::outcome(door_outcome o) {
  std::lock_guard guard{mu_};
  ++counts_.outcomes[static_cast<size_t>(o)];
}

namespace {

// Puts `value` into a ring of at most recent_requests values.
void remember(std::vector<double>& ring, size_t& next, double value) {
  if (ring.size() < recent_requests)
    ring.push_back(value);
  else
    ring[next] = value;
  next = (next + 1) % recent_requests;
}

// One observation of a summary: into its ring of recent values, its sum and its count.
void observe_into(std::vector<double>& ring, size_t& next, latency_summary& s, double value) {
  remember(ring, next, value);
  s.sum += value;
  ++s.count;
}

replay::percentiles quantiles_of(std::vector<double> values) {
  return replay::percentiles_of(values);
}

} // namespace

void door_metrics::observe(const replay::request_result& r) {
  std::lock_guard guard{mu_};
  counts_.prompt_tokens += r.prompt_tokens;
  counts_.completion_tokens += r.tokens.size();
  counts_.computed_tokens += r.computed_tokens;
  counts_.remote_hit_tokens += r.remote_reused_tokens;
  counts_.ssd_hit_tokens += r.ssd_reused_tokens;
  counts_.local_hit_tokens +=
      r.reused_tokens -
      std::min<uint32_t>(r.reused_tokens, r.remote_reused_tokens + r.ssd_reused_tokens);
  if (r.token_times_ns.empty())
    return;
  const double ttft = static_cast<double>(r.token_times_ns.front() - r.arrival_ns) / 1e9;
  ttft_.observe(ttft);
  observe_into(recent_ttft_, recent_next_ttft_, counts_.ttft, ttft);
  for (size_t i = 1; i < r.token_times_ns.size(); ++i)
    tbt_.observe(static_cast<double>(r.token_times_ns[i] - r.token_times_ns[i - 1]) / 1e9);
  if (const double tbt_ms = replay::request_tbt_ms(r.token_times_ns); tbt_ms >= 0) {
    observe_into(recent_tbt_, recent_next_tbt_, counts_.tbt, tbt_ms / 1e3);
  }
}

void door_metrics::observe_door(double in_s, double out_s) {
  std::lock_guard guard{mu_};
  observe_into(recent_in_, recent_next_in_, counts_.door_in, in_s);
  if (out_s < 0)
    return;
  observe_into(recent_out_, recent_next_out_, counts_.door_out, out_s);
}

void door_metrics::in_flight(int delta) {
  std::lock_guard guard{mu_};
  counts_.in_flight += delta;
}

int64_t door_metrics::in_flight() const {
  std::lock_guard guard{mu_};
  return counts_.in_flight;
}

double door_numbers::hit_rate() const {
  return prompt_tokens == 0
             ? 0.0
             : static_cast<double>(local_hit_tokens + remote_hit_tokens + ssd_hit_tokens) /
                   static_cast<double>(prompt_tokens);
}

door_numbers door_metrics::numbers() const {
  std::lock_guard guard{mu_};
  auto n = counts_;
  n.ttft.recent = quantiles_of(recent_ttft_);
  n.tbt.recent = quantiles_of(recent_tbt_);
  n.door_in.recent = quantiles_of(recent_in_);
  n.door_out.recent = quantiles_of(recent_out_);
  return n;
}

namespace {

// One summary's samples; `by` labels each of them (a family of several summaries).
void write_summary_samples(prom_writer& w, std::string_view name, const latency_summary& s,
                           const prom_writer::labels& by = {}) {
  auto with = [&](prom_writer::labels l) {
    l.insert(l.begin(), by.begin(), by.end());
    return l;
  };
  w.sample(name, with({{"quantile", "0.5"}}), s.recent.p50);
  w.sample(name, with({{"quantile", "0.99"}}), s.recent.p99);
  w.sample(fmt::format("{}_sum", name), by, s.sum);
  w.sample(fmt::format("{}_count", name), by, static_cast<double>(s.count));
}

void write_summary(prom_writer& w, std::string_view name, std::string_view help,
                   const latency_summary& s) {
  w.family(name, "summary", help);
  write_summary_samples(w, name, s);
}

} // namespace

void door_metrics::write(prom_writer& w) const {
  const auto n = numbers();
  w.family("crescent_requests_total", "counter",
           "Completion requests by how they ended (bad_request: refused before running)");
  for (size_t i = 0; i < n.outcomes.size(); ++i)
    w.sample("crescent_requests_total", {{"outcome", to_string(static_cast<door_outcome>(i))}},
             static_cast<double>(n.outcomes[i]));
  w.family("crescent_requests_in_flight", "gauge", "Completion requests running now");
  w.sample("crescent_requests_in_flight", {}, static_cast<double>(n.in_flight));
  {
    std::lock_guard guard{mu_};
    w.family("crescent_http_responses_total", "counter", "HTTP answers by path and status code");
    for (const auto& [key, count] : http_)
      w.sample("crescent_http_responses_total",
               {{"path", key.first}, {"code", std::to_string(key.second)}},
               static_cast<double>(count));
    ttft_.write(w, "crescent_ttft_seconds", "Time to first token of completed requests");
    tbt_.write(w, "crescent_tbt_seconds", "Time between tokens of completed requests");
  }
  write_summary(w, "crescent_recent_ttft_seconds",
                "TTFT of completed requests; quantiles over the last 256 (nearest rank)", n.ttft);
  write_summary(w, "crescent_recent_tbt_seconds",
                "TBT of completed requests, per request the mean of its longest 10% of token "
                "intervals; quantiles over the last 256 (nearest rank)",
                n.tbt);
  w.family("crescent_recent_front_door_seconds", "summary",
           "The front door's share of a completed request's TTFT, which crescent_ttft_seconds "
           "leaves out: phase=in, from the HTTP handler's start to the request actor's arrival; "
           "phase=out (streamed requests), from the first token to the first event written. "
           "Quantiles over the last 256 (nearest rank)");
  write_summary_samples(w, "crescent_recent_front_door_seconds", n.door_in, {{"phase", "in"}});
  write_summary_samples(w, "crescent_recent_front_door_seconds", n.door_out, {{"phase", "out"}});
  w.family("crescent_prompt_tokens_total", "counter", "Prompt tokens of completed requests");
  w.sample("crescent_prompt_tokens_total", {}, static_cast<double>(n.prompt_tokens));
  w.family("crescent_completion_tokens_total", "counter",
           "Tokens generated for completed requests");
  w.sample("crescent_completion_tokens_total", {}, static_cast<double>(n.completion_tokens));
  w.family("crescent_prefill_computed_tokens_total", "counter",
           "Prompt tokens whose KV prefill computed (the rest was reused)");
  w.sample("crescent_prefill_computed_tokens_total", {}, static_cast<double>(n.computed_tokens));
  w.family("crescent_prefix_hit_tokens_total", "counter",
           "Prompt tokens whose KV was reused, by where it came from (local: the prefill "
           "node's own pool memory; remote: another node's, pulled; ssd: read back from an "
           "SSD tier for the request)");
  w.sample("crescent_prefix_hit_tokens_total", {{"tier", "local"}},
           static_cast<double>(n.local_hit_tokens));
  w.sample("crescent_prefix_hit_tokens_total", {{"tier", "remote"}},
           static_cast<double>(n.remote_hit_tokens));
  w.sample("crescent_prefix_hit_tokens_total", {{"tier", "ssd"}},
           static_cast<double>(n.ssd_hit_tokens));
}

namespace {

// Asks every handle for its stats at once; each answer (or nullopt) in order.
template <class Handle>
std::vector<std::optional<reply_t<Handle, stats_atom>>>
ask_stats(caf::scoped_actor& self, const std::vector<Handle>& handles,
          std::chrono::milliseconds timeout) {
  std::vector<std::optional<reply_t<Handle, stats_atom>>> out(handles.size());
  std::vector<decltype(self->request(handles[0], timeout, stats_atom::value))> pending;
  for (const auto& h : handles)
    pending.push_back(self->request(h, timeout, stats_atom::value));
  for (size_t i = 0; i < pending.size(); ++i)
    pending[i].receive([&](reply_t<Handle, stats_atom>& e) { out[i] = std::move(e); },
                       [](caf::error&) {});
  return out;
}

// The workers of one role that answered, each on its node; counts the others in `unanswered`.
void collect_workers(const char* role,
                     const std::vector<std::optional<typed_envelope<wire::WorkerStats>>>& answers,
                     const std::vector<uint32_t>& nodes, cluster_numbers& out) {
  for (size_t i = 0; i < answers.size(); ++i) {
    std::optional<worker_numbers> row;
    if (answers[i])
      if (auto r = read_as<wire::WorkerStats>(*answers[i], [&](wire::WorkerStats::Reader in) {
            return worker_numbers{role,
                                  in.getInstance(),
                                  i < nodes.size() ? nodes[i] : 0,
                                  in.getQueuedJobs(),
                                  in.getActiveRequests(),
                                  in.getFreePages(),
                                  in.getBadMessages(),
                                  in.getComputeNs(),
                                  in.getLoadMisses(),
                                  in.getCodecErrors()};
          }))
        row = *r;
    if (row)
      out.workers.push_back(std::move(*row));
    else
      ++out.unanswered;
  }
}

void write_workers(prom_writer& w, const std::vector<worker_numbers>& rows) {
  struct column {
    const char* name;
    const char* type;
    const char* help;
    double (*get)(const worker_numbers&);
  };
  static const column columns[] = {
      {"crescent_instance_queued_jobs", "gauge", "Jobs waiting in an instance's queue",
       [](const worker_numbers& r) { return double(r.queued); }},
      {"crescent_instance_active_requests", "gauge", "Requests an instance is running",
       [](const worker_numbers& r) { return double(r.active); }},
      {"crescent_instance_free_kv_pages", "gauge", "KV pages an instance has free",
       [](const worker_numbers& r) { return double(r.free_pages); }},
      {"crescent_instance_compute_seconds_total", "counter", "Engine time an instance spent",
       [](const worker_numbers& r) { return double(r.compute_ns) / 1e9; }},
      {"crescent_instance_load_misses_total", "counter",
       "Pool blocks an instance refused on loading (checksum or transport)",
       [](const worker_numbers& r) { return double(r.load_misses); }},
      {"crescent_instance_codec_errors_total", "counter",
       "Blocks an instance's KV codec could not encode or decode (kv_codec)",
       [](const worker_numbers& r) { return double(r.codec_errors); }},
  };
  for (const auto& c : columns) {
    w.family(c.name, c.type, c.help);
    for (const auto& row : rows)
      w.sample(c.name, {{"role", row.role}, {"instance", std::to_string(row.instance)}},
               c.get(row));
  }
}

void write_owners(prom_writer& w, const std::vector<owner_numbers>& rows) {
  w.family("crescent_pool_capacity_bytes", "gauge", "KV pool capacity by node and tier");
  for (const auto& r : rows) {
    w.sample("crescent_pool_capacity_bytes", {{"node", std::to_string(r.node)}, {"tier", "dram"}},
             double(r.dram_cap));
    w.sample("crescent_pool_capacity_bytes", {{"node", std::to_string(r.node)}, {"tier", "ssd"}},
             double(r.ssd_cap));
  }
  w.family("crescent_pool_used_bytes", "gauge", "KV pool bytes in use by node and tier");
  for (const auto& r : rows) {
    w.sample("crescent_pool_used_bytes", {{"node", std::to_string(r.node)}, {"tier", "dram"}},
             double(r.dram_used));
    w.sample("crescent_pool_used_bytes", {{"node", std::to_string(r.node)}, {"tier", "ssd"}},
             double(r.ssd_used));
  }
  struct column {
    const char* name;
    const char* type;
    const char* help;
    uint64_t owner_numbers::*field;
  };
  static const column columns[] = {
      {"crescent_pool_blocks", "gauge", "Blocks a node's owner holds", &owner_numbers::blocks},
      {"crescent_pool_evictions_total", "counter", "Blocks a node evicted",
       &owner_numbers::evictions},
      {"crescent_pool_offloads_total", "counter", "Blocks a node moved from DRAM to SSD",
       &owner_numbers::offloads},
      {"crescent_pool_promotions_total", "counter", "Blocks a node moved from SSD to DRAM",
       &owner_numbers::promotions},
      {"crescent_pool_ssd_write_errors_total", "counter", "Offloads that failed",
       &owner_numbers::ssd_write_errors},
      {"crescent_pool_ssd_read_errors_total", "counter", "Promotions that failed",
       &owner_numbers::ssd_read_errors},
  };
  for (const auto& c : columns) {
    w.family(c.name, c.type, c.help);
    for (const auto& r : rows)
      w.sample(c.name, {{"node", std::to_string(r.node)}}, double(r.*c.field));
  }
}

} // namespace

cluster_numbers gather_cluster_numbers(caf::actor_system& sys, cluster& cl,
                                       std::chrono::milliseconds timeout) {
  const auto& dir = cl.dir();
  caf::scoped_actor self{sys};
  // Every question is asked before any answer is awaited: a scrape waits `timeout` at most.
  auto conductor = ask_stats(self, std::vector{dir.conductor}, timeout);
  auto master = ask_stats(self, std::vector{dir.store_master}, timeout);
  auto owners = ask_stats(self, dir.block_owners, timeout);
  auto prefill = ask_stats(self, dir.prefill, timeout);
  auto decode = ask_stats(self, dir.decode, timeout);
  auto coupled = ask_stats(self, dir.coupled, timeout);
  cluster_numbers out;

  if (conductor[0])
    if (auto c = read_as<wire::ConductorStats>(*conductor[0], [](wire::ConductorStats::Reader in) {
          conductor_numbers n;
          n.placed = in.getPlaced();
          n.rejected = in.getRejected();
          n.live_nodes = in.getLiveNodes();
          n.bad_messages = in.getBadMessages();
          n.prefill_queue_jobs = to_vector(in.getPrefillQueueJobs());
          for (auto ns : in.getPrefillQueueNs())
            n.prefill_queue_s.push_back(static_cast<double>(ns) / 1e9);
          n.decode_active = to_vector(in.getDecodeActive());
          return n;
        }))
      out.conductor = std::move(*c);
  out.unanswered += out.conductor ? 0 : 1;

  if (master[0])
    if (auto m = read_as<wire::StoreStats>(*master[0], [](wire::StoreStats::Reader in) {
          return store_numbers{in.getCompleteBlocks(),   in.getPendingBlocks(),
                               in.getLostBlocks(),       in.getEvictionsApproved(),
                               in.getEvictionsRefused(), in.getReplicasAdded(),
                               in.getBadMessages()};
        }))
      out.store_master = *m;
  out.unanswered += out.store_master ? 0 : 1;

  for (const auto& a : owners) {
    std::optional<owner_numbers> row;
    if (a)
      if (auto r = read_as<wire::OwnerStats>(*a, [](wire::OwnerStats::Reader in) {
            return owner_numbers{in.getNode(),           in.getDramCapacityBytes(),
                                 in.getDramUsedBytes(),  in.getSsdCapacityBytes(),
                                 in.getSsdUsedBytes(),   in.getBlocks(),
                                 in.getEvictions(),      in.getOffloads(),
                                 in.getPromotions(),     in.getBadMessages(),
                                 in.getSsdWriteErrors(), in.getSsdReadErrors()};
          }))
        row = *r;
    if (row)
      out.owners.push_back(*row);
    else
      ++out.unanswered;
  }
  collect_workers("prefill", prefill, dir.prefill_node, out);
  collect_workers("decode", decode, dir.decode_node, out);
  collect_workers("coupled", coupled, dir.coupled_node, out);
  out.transfer = cl.transfer().metrics();
  return out;
}

void write_cluster_metrics(prom_writer& w, const cluster_numbers& c) {
  // bad messages per actor: (actor, id) -> count
  std::vector<std::tuple<std::string, uint32_t, uint64_t>> bad;
  if (const auto& in = c.conductor) {
    w.family("crescent_conductor_placed_total", "counter", "Requests the conductor placed");
    w.sample("crescent_conductor_placed_total", {}, double(in->placed));
    w.family("crescent_conductor_rejected_total", "counter",
             "Requests the conductor rejected (admission)");
    w.sample("crescent_conductor_rejected_total", {}, double(in->rejected));
    w.family("crescent_live_nodes", "gauge", "Nodes the conductor hears from");
    w.sample("crescent_live_nodes", {}, in->live_nodes);
    w.family("crescent_conductor_prefill_queue_jobs", "gauge",
             "Jobs the conductor counts queued per prefill instance");
    for (size_t i = 0; i < in->prefill_queue_jobs.size(); ++i)
      w.sample("crescent_conductor_prefill_queue_jobs", {{"instance", std::to_string(i)}},
               in->prefill_queue_jobs[i]);
    w.family("crescent_conductor_prefill_queue_seconds", "gauge",
             "The conductor's predicted queue time per prefill instance: until it is free of the "
             "jobs placed on it");
    for (size_t i = 0; i < in->prefill_queue_s.size(); ++i)
      w.sample("crescent_conductor_prefill_queue_seconds", {{"instance", std::to_string(i)}},
               in->prefill_queue_s[i]);
    w.family("crescent_conductor_decode_active", "gauge",
             "Requests the conductor counts per decode instance");
    for (size_t i = 0; i < in->decode_active.size(); ++i)
      w.sample("crescent_conductor_decode_active", {{"instance", std::to_string(i)}},
               in->decode_active[i]);
    bad.emplace_back("conductor", 0, in->bad_messages);
  }
  if (const auto& in = c.store_master) {
    w.family("crescent_store_blocks", "gauge", "Blocks the store master knows, by state");
    w.sample("crescent_store_blocks", {{"state", "complete"}}, double(in->complete_blocks));
    w.sample("crescent_store_blocks", {{"state", "pending"}}, double(in->pending_blocks));
    w.family("crescent_store_lost_blocks_total", "counter", "Blocks left without any replica");
    w.sample("crescent_store_lost_blocks_total", {}, double(in->lost_blocks));
    w.family("crescent_store_evictions_total", "counter",
             "Eviction requests by the master's answer");
    w.sample("crescent_store_evictions_total", {{"answer", "approved"}},
             double(in->evictions_approved));
    w.sample("crescent_store_evictions_total", {{"answer", "refused"}},
             double(in->evictions_refused));
    w.family("crescent_store_replicas_added_total", "counter",
             "Replicas of existing blocks committed");
    w.sample("crescent_store_replicas_added_total", {}, double(in->replicas_added));
    bad.emplace_back("store_master", 0, in->bad_messages);
  }
  write_owners(w, c.owners);
  for (const auto& r : c.owners)
    bad.emplace_back("block_owner", r.node, r.bad);
  write_workers(w, c.workers);
  for (const auto& row : c.workers)
    bad.emplace_back(row.role + "_worker", row.instance, row.bad);

  w.family("crescent_bad_messages_total", "counter",
           "Messages an actor refused (malformed, wrong sender, out of range)");
  for (const auto& [actor, id, count] : bad)
    w.sample("crescent_bad_messages_total", {{"actor", actor}, {"id", std::to_string(id)}},
             double(count));
  w.family("crescent_scrape_unanswered_actors", "gauge",
           "Actors that did not answer this scrape in time (their numbers are missing)");
  w.sample("crescent_scrape_unanswered_actors", {}, double(c.unanswered));
  write_transfer_metrics(w, c.transfer);
}

void write_transfer_metrics(prom_writer& w, const std::vector<transport::path_metrics>& paths) {
  struct column {
    const char* name;
    const char* help;
    uint64_t transport::path_metrics::*field;
  };
  static const column columns[] = {
      {"crescent_transfer_read_bytes_total", "Bytes read by path and peer node",
       &transport::path_metrics::bytes_read},
      {"crescent_transfer_written_bytes_total", "Bytes written by path and peer node",
       &transport::path_metrics::bytes_written},
      {"crescent_transfer_operations_total", "Transfer operations by path and peer node",
       &transport::path_metrics::operations},
      {"crescent_transfer_retries_total", "Slices retried by path and peer node",
       &transport::path_metrics::retries},
      {"crescent_transfer_failures_total", "Operations failed by path and peer node",
       &transport::path_metrics::failures},
  };
  for (const auto& c : columns) {
    w.family(c.name, "counter", c.help);
    for (const auto& p : paths)
      w.sample(c.name, {{"path", p.backend}, {"peer", std::to_string(p.node)}}, double(p.*c.field));
  }
}

} // namespace crescent::serve
