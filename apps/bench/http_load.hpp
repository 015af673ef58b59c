// An open-loop HTTP load generator for `crescent bench serve`: one thread, one epoll set, each
// request sent at its own time after the start whatever the others are doing: on a connection of
// its own (Connection: close), or, with keep_alive, on a connection an earlier answer left open
// (as HTTP clients with a connection pool do: OpenAI's SDKs), a new one only when none is idle. It
// reads each answer's status line, its body (chunked or not) and, in a text/event-stream, the time
// each server-sent event arrives.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace crescent::bench {

struct http_job {
  uint64_t at_ns = 0;  // when to connect, after the start (non-decreasing over the jobs)
  std::string request; // the whole HTTP/1.1 request, head and body
};

/// What came back for one job; times in ns after the start.
struct http_answer {
  int64_t start_clock_ns = 0; // the start as a steady_clock reading (CLOCK_MONOTONIC)
  int status = 0;             // 0: no answer (error says why)
  int64_t sent_ns = -1;       // connect() started, or the write on a kept-alive connection
  bool reused = false;        // sent on a connection an earlier answer left open
  int64_t head_ns = -1;       // the status line and headers had arrived
  int64_t end_ns = -1;        // the answer was whole, or the connection ended
  std::string error;          // a connection that failed, or an answer cut short
  std::string body;           // the body (de-chunked); an event stream's events are also below
  // Each `data:` event of an event stream that carries text (or the first, which carries the
  // first token): when it arrived. Events without text (the finish, usage) are not counted.
  std::vector<int64_t> token_events_ns;
  // The stream's comment lines (": ..." events, which carry no data), colon and space included.
  std::vector<std::string> comments;
  bool done = false; // the stream's `data: [DONE]` came
  bool ended() const { return end_ns >= 0; }
};

struct http_load_options {
  std::string host = "127.0.0.1";
  int port = 0;
  /// Called about every 10 ms with the answers so far; returning true ends the load at once:
  /// every connection still open is closed (the server sees its clients go away). Null: the
  /// load ends when every answer has.
  std::function<bool(const std::vector<http_answer>&)> stop;
  /// Keep each connection open after a whole answer (unless the server's head says
  /// `Connection: close`) and send a later request on it, one at a time (no pipelining). The
  /// jobs' requests should say `Connection: keep-alive` (http_post's keep_alive).
  bool keep_alive = false;
};

/// Runs every job; one answer per job, in the jobs' order.
std::vector<http_answer> run_http_load(const std::vector<http_job>& jobs,
                                       const http_load_options& opt);

/// A POST of a JSON body to `path`, with Connection: close (or keep-alive); `headers`: more
/// header lines, each "Name: value\r\n".
std::string http_post(const std::string& host, int port, const std::string& path,
                      const std::string& json_body, const std::string& headers = {},
                      bool keep_alive = false);

} // namespace crescent::bench
