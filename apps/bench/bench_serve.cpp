#include "apps/bench/bench_serve.hpp"

#include "apps/bench/child_process.hpp"
#include "apps/bench/http_load.hpp"
#include "apps/replay/real_time.hpp"
#include "apps/replay/report.hpp"
#include "apps/run_command.hpp"
#include "apps/serve/openai.hpp"
#include "messages/errors.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace crescent::bench {

namespace {

using namespace std::chrono_literals;

// How long a cluster just brought up is left alone before the first timed request, in process
// and over HTTP alike (the server's HTTP threads start after it says it listens).
constexpr auto settle = 1s;

int fail(const std::string& what) {
  fmt::print(stderr, "crescent bench serve: {}\n", what);
  return 2;
}

const char* verdict(bool met) {
  return met ? "met" : "NOT met";
}

double mib(uint64_t kib) {
  return static_cast<double>(kib) / 1024;
}

// A `crescent serve` child of this binary on 127.0.0.1 and a free port; its stderr goes to `log`.
struct server {
  std::optional<child_process> process;
  int port = 0;
  std::string log;

  static caf::expected<server> start(const std::string& config_path, const std::string& log) {
    std::vector<std::string> args{"serve", "--listen", "127.0.0.1:0"};
    if (!config_path.empty()) {
      args.push_back("--config");
      args.push_back(config_path);
    }
    auto p = child_process::spawn(self_executable(), args, log);
    if (!p)
      return std::move(p.error());
    server s;
    s.process.emplace(std::move(*p));
    s.log = log;
    auto line = s.process->read_line(120s);
    if (!line)
      return make_error(errc::internal, "crescent serve did not start (its log: " + log +
                                            "): " + describe(line.error()));
    const auto at = line->rfind(':');
    s.port = at == std::string::npos ? 0 : std::atoi(line->c_str() + at + 1);
    if (s.port <= 0)
      return make_error(errc::internal, "crescent serve said: " + *line);
    // It prints its line once bound; its HTTP threads start after. Until it answers, then for
    // the settling time both sides of the replay get.
    const auto models = fmt::format("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n"
                                    "Connection: close\r\n\r\n",
                                    s.port);
    for (int tries = 0;; ++tries) {
      auto a = run_http_load({{0, models}}, {"127.0.0.1", s.port, {}});
      if (a[0].status == 200)
        break;
      if (tries == 100)
        return make_error(errc::internal, "crescent serve does not answer GET /v1/models");
      std::this_thread::sleep_for(100ms);
    }
    std::this_thread::sleep_for(settle);
    return s;
  }

  // kB of a field of /proc/PID/status (VmRSS, VmHWM); 0 when unreadable.
  uint64_t status_kib(const char* field) const {
    std::ifstream in{fmt::format("/proc/{}/status", process->pid())};
    std::string line;
    const std::string key = std::string{field} + ":";
    while (std::getline(in, line))
      if (line.rfind(key, 0) == 0)
        return std::strtoull(line.c_str() + key.size(), nullptr, 10);
    return 0;
  }

  bool stop() {
    process->signal(SIGTERM);
    auto status = process->wait_exit(60s);
    return status && *status == 0;
  }
};

std::string completion_request(int port, const nlohmann::json& prompt, uint32_t max_tokens,
                               bool keep_alive = false) {
  nlohmann::json body = {{"model", "crescent-reference"},
                         {"prompt", prompt},
                         {"max_tokens", max_tokens},
                         {"stream", true}};
  // The server's own times for each request come back as a comment at the stream's end.
  return http_post("127.0.0.1", port, "/v1/completions", body.dump(),
                   fmt::format("{}: 1\r\n", serve::timing_header), keep_alive);
}

double ms(int64_t ns) {
  return static_cast<double>(ns) / 1e6;
}

struct side {
  size_t completed = 0, rejected = 0, failed = 0;
  std::vector<double> ttft_ms, tbt_ms;
  uint64_t tokens = 0;
  double wall_s = 0;
  std::string first_failure;
  // Over HTTP, the completed requests whose server sent its times: each one's TTFT at the client
  // and, inside the server, its request actor's TTFT (what the in-process side measures); and
  // the client's TTFT in the five parts that make it up, one after the other: the connect to the
  // handler's start (accept, hand-off to an HTTP thread, read, parse), the handler to the request
  // actor's arrival, the request actor's TTFT, its first token to the first event written, and
  // that event's way to the client.
  std::vector<double> paired_http_ms, paired_actor_ms, added_ms;
  std::vector<double> to_handler_ms, door_in_ms, door_out_ms, to_client_ms;
};

side in_process_side(const replay::real_time_run& run) {
  side s;
  for (const auto& r : run.results) {
    if (r.status == replay::outcome_status::rejected) {
      ++s.rejected;
      continue;
    }
    if (r.status == replay::outcome_status::failed || r.token_times_ns.empty()) {
      ++s.failed;
      if (s.first_failure.empty())
        s.first_failure = r.reason;
      continue;
    }
    ++s.completed;
    s.tokens += r.tokens.size();
    s.ttft_ms.push_back(ms(r.token_times_ns.front() - r.arrival_ns));
    if (auto t = replay::request_tbt_ms(r.token_times_ns); t >= 0)
      s.tbt_ms.push_back(t);
  }
  s.wall_s = run.wall_s;
  return s;
}

// One completed request's server times beside its client times (one steady clock for both).
void add_paired(side& s, const http_answer& a, const serve::server_timing& t, double ttft_ms) {
  const int64_t sent = a.start_clock_ns + a.sent_ns;
  const int64_t received = a.start_clock_ns + a.token_events_ns.front();
  const double actor_ms = ms(t.first_token_ns - t.arrival_ns);
  s.paired_http_ms.push_back(ttft_ms);
  s.paired_actor_ms.push_back(actor_ms);
  s.added_ms.push_back(ttft_ms - actor_ms);
  s.to_handler_ms.push_back(ms(t.handler_ns - sent));
  s.door_in_ms.push_back(ms(t.arrival_ns - t.handler_ns));
  if (t.first_event_ns >= 0) {
    s.door_out_ms.push_back(ms(t.first_event_ns - t.first_token_ns));
    s.to_client_ms.push_back(ms(received - t.first_event_ns));
  }
}

side http_side(const std::vector<http_answer>& answers,
               const std::vector<replay::synthetic_request>& requests) {
  side s;
  int64_t first = -1, last = 0;
  for (size_t i = 0; i < answers.size(); ++i) {
    const auto& a = answers[i];
    first = first < 0 ? a.sent_ns : std::min(first, a.sent_ns);
    last = std::max(last, a.end_ns);
    if (a.status == 429) {
      ++s.rejected;
      continue;
    }
    if (a.status != 200 || !a.done || a.token_events_ns.empty()) {
      ++s.failed;
      if (s.first_failure.empty())
        s.first_failure = fmt::format("HTTP {} {}{}", a.status, a.error, a.body.substr(0, 300));
      continue;
    }
    ++s.completed;
    s.tokens += requests[i].max_new_tokens; // no end-of-sequence token: max_tokens always
    const double ttft_ms = ms(a.token_events_ns.front() - a.sent_ns);
    s.ttft_ms.push_back(ttft_ms);
    for (const auto& c : a.comments)
      if (auto t = serve::parse_timing_comment(c))
        add_paired(s, a, *t, ttft_ms);
    std::vector<int64_t> times{a.token_events_ns};
    if (auto t = replay::request_tbt_ms(times); t >= 0)
      s.tbt_ms.push_back(t);
  }
  s.wall_s = first < 0 ? 0 : static_cast<double>(last - first) / 1e9;
  return s;
}

std::vector<http_job> jobs_for(const std::vector<replay::synthetic_request>& requests, int port,
                               double rate_factor, bool keep_alive = false) {
  std::vector<http_job> jobs;
  for (const auto& r : requests)
    jobs.push_back({static_cast<uint64_t>(static_cast<double>(r.arrival_ns) / rate_factor),
                    completion_request(port, r.tokens, r.max_new_tokens, keep_alive)});
  return jobs;
}

std::string log_path(const char* phase) {
  return (std::filesystem::temp_directory_path() /
          fmt::format("crescent-bench-serve-{}-{}.log", getpid(), phase))
      .string();
}

// Issue 21's targets for the HTTP layer's TTFT against `base` (named `base_name`): p50 at most
// 1.10 times, p99 at most 1 ms more.
void print_ttft_targets(const char* base_name, const replay::percentiles& http,
                        const replay::percentiles& base) {
  const double ratio = base.p50 > 0 ? http.p50 / base.p50 : 0;
  const double diff = http.p99 - base.p99;
  fmt::print("ratio         p50 TTFT HTTP / {}: {:.3f} (target <= 1.10: {})\n", base_name, ratio,
             verdict(ratio > 0 && ratio <= 1.10));
  fmt::print("difference    p99 TTFT HTTP - {}: {:+.2f} ms (target <= 1 ms: {})\n", base_name, diff,
             verdict(base.count > 0 && diff <= 1.0));
}

// The HTTP side against its own requests inside the server, request by request: what the
// front door and the connection add, without the spread between two runs of the cluster.
void print_paired(const side& remote) {
  auto http = remote.paired_http_ms, actor = remote.paired_actor_ms, added = remote.added_ms;
  if (http.empty()) {
    fmt::print("paired        the server sent no times (an older crescent serve?)\n");
    return;
  }
  const auto h = replay::percentiles_of(http), a = replay::percentiles_of(actor);
  const auto d = replay::percentiles_of(added);
  fmt::print("paired        the same {} requests inside the server (their request actors' TTFT, "
             "what the in-process side measures): p50 {:.2f} ms, p99 {:.2f} ms\n",
             http.size(), a.p50, a.p99);
  print_ttft_targets("request actors", h, a);
  fmt::print("added         per request, HTTP TTFT - its request actor's: p50 {:.2f} ms, p90 "
             "{:.2f} ms, p99 {:.2f} ms\n",
             d.p50, d.p90, d.p99);
  auto part = [](const char* what, std::vector<double> v) {
    const auto p = replay::percentiles_of(v);
    fmt::print("              {:<58} p50 {:.3f} ms, p99 {:.3f} ms\n", what, p.p50, p.p99);
  };
  part("connect() to the HTTP handler's start", remote.to_handler_ms);
  part("the handler's start to the request actor's arrival", remote.door_in_ms);
  part("the request actor's first token to the first event written", remote.door_out_ms);
  part("the first event written to the client's read of it", remote.to_client_ms);
}

// The HTTP side of the replay on a fresh server (so that neither side finds the other's KV
// cached): a connection per request, or kept-alive connections (each request on one an earlier
// answer left open where one is idle, as clients with a connection pool send). Prints its
// figures against the in-process side's; 0 if every request ended and the server stopped cleanly.
int replay_over_http(const bench_serve_options& opt,
                     const std::vector<replay::synthetic_request>& requests, const side& local,
                     bool keep_alive) {
  auto srv = server::start(opt.config_path, log_path(keep_alive ? "replay-keep-alive" : "replay"));
  if (!srv)
    return fail(describe(srv.error()));
  http_load_options load{"127.0.0.1", srv->port, {}};
  load.keep_alive = keep_alive;
  const auto answers = run_http_load(jobs_for(requests, srv->port, 1.0, keep_alive), load);
  const bool stopped = srv->stop();
  const auto remote = http_side(answers, requests);
  const auto reused =
      std::count_if(answers.begin(), answers.end(), [](const http_answer& a) { return a.reused; });
  if (keep_alive)
    fmt::print("over HTTP     kept-alive connections: {} of {} requests sent on a connection an "
               "earlier answer left open\n",
               reused, answers.size());
  else
    fmt::print("over HTTP     a connection per request (Connection: close)\n");

  auto ttft_local = local.ttft_ms, ttft_http = remote.ttft_ms;
  auto tbt_local = local.tbt_ms, tbt_http = remote.tbt_ms;
  const auto tl = replay::percentiles_of(ttft_local), th = replay::percentiles_of(ttft_http);
  const auto bl = replay::percentiles_of(tbt_local), bh = replay::percentiles_of(tbt_http);
  fmt::print("                            in process        HTTP\n");
  fmt::print("  completed                 {:>10}  {:>10}\n", local.completed, remote.completed);
  fmt::print("  rejected (429)            {:>10}  {:>10}\n", local.rejected, remote.rejected);
  fmt::print("  failed                    {:>10}  {:>10}\n", local.failed, remote.failed);
  fmt::print("  TTFT ms p50 / p90 / p99   {:>10.2f}  {:>10.2f}\n", tl.p50, th.p50);
  fmt::print("                            {:>10.2f}  {:>10.2f}\n", tl.p90, th.p90);
  fmt::print("                            {:>10.2f}  {:>10.2f}\n", tl.p99, th.p99);
  fmt::print("  TBT ms p50 / p99          {:>10.2f}  {:>10.2f}\n", bl.p50, bh.p50);
  fmt::print("                            {:>10.2f}  {:>10.2f}\n", bl.p99, bh.p99);
  auto rate = [](const side& s) {
    return s.wall_s > 0 ? fmt::format("{:.1f} req/s {:.0f} tok/s", s.completed / s.wall_s,
                                      static_cast<double>(s.tokens) / s.wall_s)
                        : std::string{"-"};
  };
  fmt::print("  throughput                {}  |  {}\n", rate(local), rate(remote));
  print_ttft_targets("in-process", th, tl);
  fmt::print("              (HTTP TBT: between server-sent events, which may carry several "
             "tokens)\n");
  print_paired(remote);
  if (!remote.first_failure.empty())
    fmt::print(stderr, "  a failed request: {}\n", remote.first_failure);
  std::fflush(stdout);
  if (!stopped)
    fmt::print(stderr, "crescent bench serve: the server did not stop cleanly (log {})\n",
               srv->log);
  return remote.failed == 0 && stopped ? 0 : 1;
}

int replay_phase(const bench_serve_options& opt, const cluster_config& cfg,
                 const std::vector<replay::synthetic_request>& requests) {
  fmt::print("replay        {} requests at the trace's times x{}, streamed; in process, then "
             "over HTTP twice: a connection per request, then kept-alive connections\n",
             requests.size(), opt.speedup);
  std::fflush(stdout);
  auto run = replay::replay_in_real_time(cfg, requests, nullptr,
                                         [](cluster&) { std::this_thread::sleep_for(settle); });
  if (!run)
    return fail("in-process replay: " + describe(run.error()));
  const auto local = in_process_side(*run);
  if (!local.first_failure.empty())
    fmt::print(stderr, "  a failed request in process: {}\n", local.first_failure);
  const int closed = replay_over_http(opt, requests, local, false);
  const int kept = replay_over_http(opt, requests, local, true);
  return local.failed == 0 && closed == 0 && kept == 0 ? 0 : 1;
}

int clients_phase(const bench_serve_options& opt) {
  // Admission would refuse some of the clients (their predicted TBT): this phase measures what
  // the front door holds, so its cluster admits every request (unless given a file).
  std::string config = opt.clients_config_path;
  if (config.empty()) {
    config = (std::filesystem::temp_directory_path() /
              fmt::format("crescent-bench-serve-{}-clients.yaml", getpid()))
                 .string();
    // Decode memory for every client's prompt and tokens (the built-in model, 2 decode
    // instances), small batches so that the clients stay held while the last ones connect.
    const cluster_config builtin;
    const double kv_bytes = static_cast<double>(opt.clients) * (opt.client_tokens + 64) *
                            static_cast<double>(builtin.model.kv_bytes_per_token()) * 1.25;
    const auto kv_mib = std::max<uint64_t>(64, static_cast<uint64_t>(kv_bytes / 2 / (1 << 20)) + 1);
    std::ofstream{config} << fmt::format("conductor:\n  admission: none\nprefill:\n  "
                                         "queue_jobs_max: 4096\ndecode:\n  batch_max: 8\n  "
                                         "kv_mib: {}\n",
                                         kv_mib);
  }
  auto srv = server::start(config, log_path("clients"));
  if (!srv)
    return fail(describe(srv.error()));
  const uint64_t before = srv->status_kib("VmRSS");
  std::vector<http_job> jobs;
  for (uint32_t i = 0; i < opt.clients; ++i)
    // 2 ms apart: Debian's cpp-httplib listens with a backlog of 5, and a connection beyond it
    // waits for its SYN to be sent again (a second later).
    jobs.push_back(
        {uint64_t{i} * 2'000'000,
         completion_request(srv->port, fmt::format("client {} says hello", i), opt.client_tokens)});
  uint64_t peak = before;
  std::optional<std::chrono::steady_clock::time_point> held_since;
  size_t held = 0, ended = 0, held_max = 0;
  const auto give_up = std::chrono::steady_clock::now() + 120s;
  http_load_options load{
      "127.0.0.1", srv->port, [&](const std::vector<http_answer>& answers) {
        peak = std::max(peak, srv->status_kib("VmRSS"));
        held = ended = 0;
        for (const auto& a : answers) {
          held += !a.ended() && !a.token_events_ns.empty() ? 1 : 0;
          ended += a.ended() ? 1 : 0;
        }
        held_max = std::max(held_max, held);
        const auto now = std::chrono::steady_clock::now();
        if (!held_since && held + ended == answers.size() && answers.back().sent_ns >= 0)
          held_since = now;
        return now > give_up ||
               (held_since && now - *held_since >= std::chrono::duration<double>(opt.hold_s));
      }};
  const auto answers = run_http_load(jobs, load);
  size_t refused = 0, other = 0;
  for (const auto& a : answers)
    if (a.status == 429 && refused++ == 0)
      fmt::print(stderr, "  the first refusal: {}\n", a.body);
    else if (a.status != 200 && a.status != 429 && other++ == 0)
      fmt::print(stderr, "  the first other answer: HTTP {} {} {}\n", a.status, a.error,
                 a.body.substr(0, 300));
  const uint64_t hwm = srv->status_kib("VmHWM");
  const bool stopped = srv->stop();
  if (opt.clients_config_path.empty())
    std::filesystem::remove(config);
  const double growth = mib(peak - before);
  fmt::print("clients       on {}\n", opt.clients_config_path.empty()
                                          ? "the built-in cluster with admission none"
                                          : opt.clients_config_path);
  fmt::print("              {} streaming clients of {} tokens: at most {} held open at once "
             "(each past its first token), {} refused (429), {} other answers{}\n",
             opt.clients, opt.client_tokens, held_max, refused, other,
             held_since ? "" : "; gave up waiting after 120 s");
  fmt::print("  server RSS  {:.1f} MiB before, {:.1f} MiB highest while held (VmHWM {:.1f} "
             "MiB)\n",
             mib(before), mib(peak), mib(hwm));
  fmt::print("growth        server RSS with {} clients held: +{:.1f} MiB (target < 200 MiB: "
             "{})\n",
             held_max, growth, verdict(held_max == opt.clients && growth < 200));
  std::fflush(stdout);
  return stopped ? 0 : 1;
}

int overload_phase(const bench_serve_options& opt, const cluster_config& cfg,
                   const std::vector<replay::synthetic_request>& requests) {
  const double factor = opt.overload;
  fmt::print("overload      {} requests at {}x the replay's rate (the trace's times x{})\n",
             requests.size(), factor, opt.speedup * factor);
  std::fflush(stdout);
  auto srv = server::start(opt.config_path, log_path("overload"));
  if (!srv)
    return fail(describe(srv.error()));
  const auto answers =
      run_http_load(jobs_for(requests, srv->port, factor), {"127.0.0.1", srv->port, {}});
  const uint64_t hwm = srv->status_kib("VmHWM");
  const uint64_t rss = srv->status_kib("VmRSS");
  const bool stopped = srv->stop();
  const auto admitted = http_side(answers, requests);
  std::vector<double> refusal_ms;
  for (const auto& a : answers)
    if (a.status == 429)
      refusal_ms.push_back(ms(a.end_ns - a.sent_ns));
  auto ttft = admitted.ttft_ms;
  const auto t = replay::percentiles_of(ttft);
  const auto r = replay::percentiles_of(refusal_ms);
  size_t within = 0;
  for (double v : admitted.ttft_ms)
    within += v <= cfg.conductor.slo_ttft_ms ? 1 : 0;
  fmt::print("  answers     {} admitted and completed, {} refused (429), {} failed\n",
             admitted.completed, admitted.rejected, admitted.failed);
  if (r.count > 0)
    fmt::print("429 latency   p50 {:.2f} ms, p99 {:.2f} ms of {} (target p99 < 5 ms: {})\n", r.p50,
               r.p99, r.count, verdict(r.p99 < 5));
  else
    fmt::print("429 latency   none refused at this rate: not measured (target p99 < 5 ms: not "
               "measured)\n");
  fmt::print("admitted TTFT p50 {:.2f} ms, p99 {:.2f} ms; {} of {} within the TTFT SLO of {} ms "
             "({})\n",
             t.p50, t.p99, within, admitted.completed, cfg.conductor.slo_ttft_ms,
             verdict(within == admitted.completed));
  fmt::print("server RSS    peak {:.1f} MiB (VmHWM), {:.1f} MiB at the end\n", mib(hwm), mib(rss));
  if (!admitted.first_failure.empty())
    fmt::print(stderr, "  a failed request: {}\n", admitted.first_failure);
  std::fflush(stdout);
  return stopped && admitted.failed == 0 ? 0 : 1;
}

} // namespace

int bench_serve(const bench_serve_options& opt) {
  spdlog::set_level(spdlog::level::err);
  if (opt.requests == 0 || opt.speedup <= 0 || opt.output_scale <= 0 || opt.overload <= 0 ||
      opt.hold_s < 0)
    return fail("--requests, --speedup, --output-scale and --overload must be positive, "
                "--hold-s not negative");
  if (!opt.only.empty() && opt.only != "replay" && opt.only != "clients" && opt.only != "overload")
    return fail("--only " + opt.only + ": expected replay, clients or overload");
  // Every client and every server thread holds a socket: as many descriptors as allowed.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  if (opt.clients + 64 > files.rlim_cur)
    return fail(fmt::format("--clients {}: this process may open {} files at most", opt.clients,
                            files.rlim_cur));
  auto cfg = cli::real_time_config(opt.config_path);
  if (!cfg)
    return fail(describe(cfg.error()));
  cli::run_options run;
  run.trace_path = opt.trace_path;
  run.requests = opt.requests;
  run.speedup = opt.speedup;
  run.output_scale = opt.output_scale;
  auto requests = cli::requests_for(run, *cfg);
  if (!requests)
    return fail(describe(requests.error()));
  fmt::print("crescent bench serve: {} from {} on {}\n",
             opt.only.empty() ? "replay, clients, overload" : opt.only, opt.trace_path,
             opt.config_path.empty() ? "the built-in cluster" : opt.config_path);
  int status = 0;
  if (opt.only.empty() || opt.only == "replay")
    status = std::max(status, replay_phase(opt, *cfg, *requests));
  if (opt.only.empty() || opt.only == "clients")
    status = std::max(status, clients_phase(opt));
  if (opt.only.empty() || opt.only == "overload") {
    run.requests = opt.overload_requests == 0 ? 3 * opt.requests : opt.overload_requests;
    auto more = cli::requests_for(run, *cfg);
    if (!more)
      return fail(describe(more.error()));
    status = std::max(status, overload_phase(opt, *cfg, *more));
  }
  return status;
}

} // namespace crescent::bench
