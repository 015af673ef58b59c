#include "apps/serve/front_door.hpp"

#include "actors/cluster/cluster.hpp"
#include "apps/replay/report.hpp"
#include "apps/serve/client_socket.hpp"
#include "apps/serve/status_page.hpp"
#include "messages/checked_read.hpp"
#include "messages/errors.hpp"
#include "messages/schema/request.capnp.h"

#include <caf/scoped_actor.hpp>
#include <fmt/format.h>
#include <httplib.h>

#include <memory>
#include <optional>

namespace crescent::serve {

namespace {

using clock_type = std::chrono::steady_clock;

// One completion request in flight: the thread serving it waits on its scoped actor.
struct session {
  explicit session(caf::actor_system& sys) : self(sys) {}
  caf::scoped_actor self;
  request_actor handle;
  uint64_t id = 0;
  completion_request req;
  answer_head head;
  std::vector<uint32_t> pending; // tokens heard and not yet written (streamed)
  std::optional<replay::request_result> outcome;
  clock_type::time_point deadline;
  connection_addresses client;
  int client_fd = -2; // -2: not looked for yet; -1: not found
  // On the request actor's clock (steady_clock in real time), for the front door's share of
  // TTFT (door_numbers::door_in and door_out).
  int64_t handler_start_ns = 0;
  int64_t first_event_ns = 0; // the first server-sent event written (streamed)
};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now().time_since_epoch())
      .count();
}

// The front door's share of a completed request's TTFT, in seconds: before the request actor's
// arrival, and (streamed; else negative) from its first token to the first event written.
std::pair<double, double> door_share(const session& s, const replay::request_result& r) {
  auto seconds = [](int64_t ns) { return static_cast<double>(std::max<int64_t>(ns, 0)) / 1e9; };
  const double in = seconds(r.arrival_ns - s.handler_start_ns);
  if (s.first_event_ns == 0 || r.token_times_ns.empty())
    return {in, -1.0};
  return {in, seconds(s.first_event_ns - r.token_times_ns.front())};
}

enum class wake { tokens, outcome, idle, timeout };

// Waits at most `interval` for the request's next message.
wake wait_once(session& s, std::chrono::milliseconds interval) {
  auto w = wake::idle;
  const auto prompt_tokens = static_cast<uint32_t>(s.req.prompt.size());
  auto failed = [&](std::string reason) {
    replay::request_result r;
    r.id = s.id;
    r.prompt_tokens = prompt_tokens;
    r.reason = std::move(reason);
    s.outcome = std::move(r);
    w = wake::outcome;
  };
  s.self->receive(
      [&](tokens_atom, const typed_envelope<wire::TokenBatch>& batch) {
        auto tokens = read_as<wire::TokenBatch>(
            batch, [](wire::TokenBatch::Reader in) { return to_vector(in.getTokens()); });
        if (tokens)
          s.pending.insert(s.pending.end(), tokens->begin(), tokens->end());
        w = wake::tokens;
      },
      [&](const typed_envelope<wire::RequestOutcome>& outcome) {
        s.outcome = replay::decode_outcome(outcome, s.id, prompt_tokens);
        w = wake::outcome;
      },
      [&](caf::error& err) { failed("the request actor refused it: " + describe(err)); },
      [&](caf::down_msg& down) {
        if (!s.outcome)
          failed("the request actor went away: " + describe(down.reason));
      },
      caf::after(interval) >> [] {});
  if (w == wake::idle && clock_type::now() > s.deadline)
    return wake::timeout;
  return w;
}

bool client_gone(session& s) {
  if (s.client_fd == -2)
    s.client_fd = find_connection_socket(s.client);
  return peer_gone(s.client_fd);
}

void cancel(session& s) {
  s.self->send(s.handle, cancel_atom::value);
}

std::string finish_reason(const session& s) {
  return s.outcome && s.outcome->tokens.size() >= s.req.max_tokens ? "length" : "stop";
}

usage usage_of(const replay::request_result& r) {
  return {r.prompt_tokens, static_cast<uint32_t>(r.tokens.size()), r.reused_tokens};
}

// The answer to a request that did not complete: 429 when rejected, 503 when it failed.
http_error error_of(const replay::request_result& r) {
  if (r.status == replay::outcome_status::rejected)
    return {429,
            "rate_limit_error",
            fmt::format("rejected by admission: {}", r.reason.empty() ? "overloaded" : r.reason),
            {},
            "slo_unattainable"};
  return {503, "server_error", fmt::format("the request failed: {}", r.reason), {}, {}};
}

uint16_t port_header(const httplib::Request& req, const char* name) {
  const auto v = req.get_header_value(name);
  char* end = nullptr;
  const long p = std::strtol(v.c_str(), &end, 10);
  return end != v.c_str() && p > 0 && p < 65536 ? static_cast<uint16_t>(p) : 0;
}

std::string route_label(const std::string& path) {
  for (const char* known :
       {"/v1/completions", "/v1/chat/completions", "/v1/models", "/metrics", "/"})
    if (path == known)
      return path;
  return "other";
}

} // namespace

front_door::front_door(caf::actor_system& sys, cluster& cl, door_options options)
    : sys_(sys), cl_(cl), options_(std::move(options)) {
  limits_.model = options_.model;
  limits_.vocab = cl_.config().model.vocab;
  limits_.context_tokens_max = cl_.config().model.context_tokens_max;
  limits_.max_tokens_default = options_.max_tokens_default;
  started_s_ = std::chrono::duration_cast<std::chrono::seconds>(
                   std::chrono::system_clock::now().time_since_epoch())
                   .count();
}

void front_door::answer_error(const http_error& e, httplib::Response& res) {
  res.status = e.status;
  res.set_content(error_json(e), "application/json");
}

void front_door::install(httplib::Server& server) {
  server.set_payload_max_length(options_.body_bytes_max);
  server.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(api::completions, req, res);
  });
  server.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
    completion(api::chat, req, res);
  });
  server.Get("/v1/models",
             [this](const httplib::Request&, httplib::Response& res) { models(res); });
  server.Get("/metrics",
             [this](const httplib::Request&, httplib::Response& res) { prometheus(res); });
  server.Get("/", [this](const httplib::Request&, httplib::Response& res) { status(res); });
  // Errors cpp-httplib answers itself (no such route, a body over the limit, a bad request
  // line) get OpenAI's error body too; the handlers' own errors have theirs already.
  server.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty())
      return;
    http_error e{res.status, "invalid_request_error", {}, {}, {}};
    if (res.status == 404)
      e.message = fmt::format("no route {} {}", req.method, req.path);
    else if (res.status == 413)
      e.message = fmt::format("the body is over the limit of {} bytes", options_.body_bytes_max);
    else
      e.message = fmt::format("HTTP {}", res.status);
    res.set_content(error_json(e), "application/json");
  });
  // Counted once the answer's status is final (after the error handler) and before its first
  // byte is written, so that a client that has its answer finds it in /metrics (the logger runs
  // after the write: a scrape right after an answer could miss it).
  server.set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    metrics_.http_answer(route_label(req.path), res.status);
  });
}

void front_door::models(httplib::Response& res) const {
  res.set_content(models_json(options_.model, started_s_), "application/json");
}

void front_door::prometheus(httplib::Response& res) {
  prom_writer w;
  metrics_.write(w);
  write_cluster_metrics(w, gather_cluster_numbers(sys_, cl_, options_.scrape_timeout));
  res.set_content(w.take(), "text/plain; version=0.0.4; charset=utf-8");
}

void front_door::status(httplib::Response& res) {
  status_inputs in{options_.model, &cl_.config(), metrics_.numbers(),
                   gather_cluster_numbers(sys_, cl_, options_.scrape_timeout)};
  res.set_header("Cache-Control", "no-cache");
  res.set_content(status_page(in), "text/html; charset=utf-8");
}

namespace {

std::shared_ptr<session> start(caf::actor_system& sys, cluster& cl, uint64_t id,
                               completion_request parsed, answer_head head,
                               const httplib::Request& req, int64_t handler_start_ns) {
  auto s = std::make_shared<session>(sys);
  s->handler_start_ns = handler_start_ns;
  s->id = id;
  s->req = std::move(parsed);
  s->head = std::move(head);
  s->client = {req.get_header_value("REMOTE_ADDR"), port_header(req, "REMOTE_PORT"),
               port_header(req, "LOCAL_PORT")};
  // The request actor answers by its own deadline; the margin only covers a lost actor.
  s->deadline = clock_type::now() + std::chrono::milliseconds(cl.config().request_deadline_ms) +
                std::chrono::seconds(10);
  s->handle = cl.spawn_request();
  s->self->monitor(s->handle);
  auto spec = make_request_spec(id, s->req.prompt, s->req.max_tokens);
  if (s->req.stream)
    s->self->send(s->handle, stream_atom::value, spec, caf::actor_cast<caf::actor>(s->self));
  else
    s->self->send(s->handle, run_atom::value, spec);
  return s;
}

} // namespace

void front_door::completion(api kind, const httplib::Request& req, httplib::Response& res) {
  const auto handler_start_ns = steady_ns(); // the body's parse is the front door's work too
  auto parsed = parse_request(kind, req.body, limits_);
  if (auto* e = std::get_if<http_error>(&parsed)) {
    metrics_.outcome(door_outcome::bad_request);
    return answer_error(*e, res);
  }
  const auto id = next_id_++;
  answer_head head{kind, fmt::format("{}-{}", kind == api::chat ? "chatcmpl" : "cmpl", id),
                   std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count(),
                   options_.model};
  auto s = start(sys_, cl_, id, std::get<completion_request>(std::move(parsed)), std::move(head),
                 req, handler_start_ns);
  metrics_.in_flight(1);
  // Until the first token (streamed) or the outcome: the status is not known before.
  for (;;) {
    const auto w = wait_once(*s, options_.client_check_interval);
    if (w == wake::outcome || (w == wake::tokens && s->req.stream))
      break;
    if (w == wake::timeout) {
      cancel(*s);
      metrics_.in_flight(-1);
      metrics_.outcome(door_outcome::failed);
      return answer_error({504, "server_error", "no outcome in the request's deadline", {}, {}},
                          res);
    }
    if (w == wake::idle && client_gone(*s)) {
      cancel(*s);
      metrics_.in_flight(-1);
      metrics_.outcome(door_outcome::cancelled);
      res.status = 499; // nginx's "client closed request": nobody reads it, the log counts it
      return;
    }
  }
  if (s->outcome && s->outcome->status != replay::outcome_status::completed) {
    metrics_.in_flight(-1);
    const bool rejected = s->outcome->status == replay::outcome_status::rejected;
    metrics_.outcome(rejected ? door_outcome::rejected : door_outcome::failed);
    answer_error(error_of(*s->outcome), res);
    if (rejected)
      res.set_header("Retry-After", std::to_string(std::max<uint64_t>(
                                        1, (s->outcome->retry_after_ms + 999) / 1000)));
    return;
  }
  if (!s->req.stream) {
    metrics_.in_flight(-1);
    metrics_.outcome(door_outcome::completed);
    metrics_.observe(*s->outcome);
    metrics_.observe_door(door_share(*s, *s->outcome).first, -1.0);
    res.set_content(completion_json(s->head, tokens_to_text(s->outcome->tokens), finish_reason(*s),
                                    usage_of(*s->outcome)),
                    "application/json");
    return;
  }
  res.set_header("Cache-Control", "no-cache");
  const bool timing = req.has_header(timing_header);
  res.set_chunked_content_provider("text/event-stream", [this, s, timing](size_t,
                                                                          httplib::DataSink& sink) {
    utf8_decoder text;
    bool first = true;
    auto write = [&](const std::string& event) { return sink.write(event.data(), event.size()); };
    auto gone = [&] {
      cancel(*s);
      metrics_.in_flight(-1);
      metrics_.outcome(door_outcome::cancelled);
      return false;
    };
    for (;;) {
      if (!s->pending.empty()) {
        auto chunk = text.push(s->pending);
        s->pending.clear();
        if ((!chunk.empty() || first) && !write(chunk_event(s->head, chunk, first, {})))
          return gone();
        if (first)
          s->first_event_ns = steady_ns();
        first = false;
      }
      if (s->outcome)
        break;
      const auto w = wait_once(*s, options_.client_check_interval);
      if (w == wake::idle && !sink.is_writable())
        return gone();
      if (w == wake::timeout) {
        cancel(*s);
        s->outcome = replay::request_result{};
        s->outcome->reason = "no outcome in the request's deadline";
      }
    }
    metrics_.in_flight(-1);
    const auto& r = *s->outcome;
    if (r.status == replay::outcome_status::completed) {
      metrics_.outcome(door_outcome::completed);
      metrics_.observe(r);
      const auto [in, out] = door_share(*s, r);
      metrics_.observe_door(in, out);
      if (!write(chunk_event(s->head, text.flush(), first, finish_reason(*s))))
        return false;
      if (s->req.include_usage && !write(usage_event(s->head, usage_of(r))))
        return false;
      if (timing && !r.token_times_ns.empty() &&
          !write(timing_comment({s->handler_start_ns, r.arrival_ns, r.token_times_ns.front(),
                                 s->first_event_ns == 0 ? -1 : s->first_event_ns})))
        return false;
    } else {
      metrics_.outcome(door_outcome::failed);
      if (!write(error_event(error_of(r))))
        return false;
    }
    write(std::string{done_event});
    sink.done();
    return true;
  });
}

} // namespace crescent::serve
