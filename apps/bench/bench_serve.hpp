// `crescent bench serve` (issue 21 item 6): what the HTTP front door of `crescent serve` costs,
// and how it holds up, measured against the targets (docs/benchmarks.md).
//
//  1. replay: the head of a Mooncake trace, as `crescent run` makes its requests, replayed in
//     process (the replay driver of `crescent run`, on a cluster in this process) and then over
//     HTTP (a `crescent serve` child on the same cluster file, streamed completions whose prompt
//     is the request's token ids, sent by an open-loop generator at the same times). TTFT in
//     process: the request actor's arrival to its first token; over HTTP: connect() to the first
//     server-sent event. Targets: p50 TTFT HTTP / in-process <= 1.10, p99 difference <= 1 ms.
//     Also paired: the server sends each stream's own times (docs/serve.md, X-Crescent-Timing),
//     so the same two figures come again against the same requests' request actors inside the
//     server, with what the HTTP layer added to each request, free of the spread between two
//     runs of the cluster. The HTTP side runs twice, each on a fresh server: a connection per
//     request (Connection: close), then kept-alive connections, each request sent on one an
//     earlier answer left open where one is idle (as clients with a connection pool send).
//  2. clients: N streaming clients connected to one fresh server (2 ms apart) and held open
//     until each has its first token, then for --hold-s; the growth of the server's VmRSS from
//     before the first connects to its highest sample while they are held. Target < 200 MiB.
//     Its cluster admits every request (admission none, prefill queues of 4,096 jobs, decode
//     memory for every client's tokens, decode batches of 8 so that the first clients are still
//     streaming when the last connect; --clients-config to choose another):
//     the phase measures what the front door holds, not whom admission refuses.
//  3. overload: the trace's requests at --overload times the replay's rate on a fresh server;
//     the p99 time to a whole 429 answer (target < 5 ms), the admitted requests' TTFT against
//     the cluster's TTFT SLO, the server's peak RSS (VmHWM).
// Every figure is printed next to its target with "met" or "NOT met".
#pragma once

#include <cstdint>
#include <string>

namespace crescent::bench {

struct bench_serve_options {
  std::string trace_path = "data/synthetic_trace.jsonl";
  std::string config_path; // the cluster file for both sides (empty: the built-in default)
  uint32_t requests = 200;
  double speedup = 4.0; // the replay's rate: the trace's arrivals this many times faster
  double output_scale = 1.0;
  uint32_t clients = 1000;
  std::string clients_config_path; // empty: the built-in cluster with admission none
  uint32_t client_tokens = 2000;   // max_tokens of each held client's request
  double hold_s = 2.0;
  double overload = 3.0;          // the overload phase's rate over the replay's
  uint32_t overload_requests = 0; // 0: 3 x --requests
  std::string only;               // "replay", "clients" or "overload": that phase alone
};

/// 0: every phase ran (whether or not the targets were met); 1: a phase could not run to its
/// end (a server that did not start, requests that failed); 2: bad options or trace.
int bench_serve(const bench_serve_options& opt);

} // namespace crescent::bench
