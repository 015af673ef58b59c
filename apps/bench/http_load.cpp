#include "apps/bench/http_load.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdexcept>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace crescent::bench {

namespace {

using clock_type = std::chrono::steady_clock;

struct connection {
  int fd = -1;
  size_t job = 0;
  size_t written = 0;
  std::string in;       // bytes read, head and body as they came
  size_t body_at = 0;   // where the body starts in `in` (0: head not whole yet)
  bool chunked = false; // else Content-Length, or to the end of the connection
  int64_t content_length = -1;
  size_t chunk_at = 0;  // chunked: the next chunk's size line in `in`
  size_t events_at = 0; // the next event in the answer's body
  bool complete = false;
  bool close_after = false; // the server's head said Connection: close
};

// "Transfer-Encoding: chunked", "Content-Length: N" and the status of a whole head.
void parse_head(connection& c, http_answer& a, size_t head_end) {
  const std::string head = c.in.substr(0, head_end);
  a.status = head.rfind("HTTP/1.", 0) == 0 && head.size() > 12 ? std::atoi(head.c_str() + 9) : 0;
  std::string lower = head;
  for (auto& ch : lower)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  c.chunked = lower.find("\r\ntransfer-encoding: chunked") != std::string::npos;
  c.close_after = lower.find("\r\nconnection: close") != std::string::npos;
  if (auto at = lower.find("\r\ncontent-length:"); at != std::string::npos)
    c.content_length = std::atoll(lower.c_str() + at + 17);
  c.body_at = head_end + 4;
  c.chunk_at = c.body_at;
}

// Comments kept of one answer: a server sends a few (crescent serve: one when asked).
constexpr size_t comments_max = 16;

// The events whole in the body so far: a `data:` event with text is a token event.
void scan_events(connection& c, http_answer& a, int64_t now) {
  for (;;) {
    const auto end = a.body.find("\n\n", c.events_at);
    if (end == std::string::npos)
      return;
    const std::string_view event{a.body.data() + c.events_at, end - c.events_at};
    c.events_at = end + 2;
    if (event.rfind(":", 0) == 0 && a.comments.size() < comments_max) {
      a.comments.emplace_back(event);
      continue;
    }
    if (event.rfind("data: ", 0) != 0)
      continue;
    const auto payload = event.substr(6);
    if (payload == "[DONE]") {
      a.done = true;
      continue;
    }
    const bool text = payload.find("\"text\":\"") != std::string_view::npos &&
                      payload.find("\"text\":\"\"") == std::string_view::npos;
    if (text || (a.token_events_ns.empty() && payload.find("\"choices\":[{") != payload.npos))
      a.token_events_ns.push_back(now);
  }
}

// Takes what the body has gained from `in`; marks the answer complete when it is whole.
void take_body(connection& c, http_answer& a, int64_t now) {
  if (c.body_at == 0) {
    const auto head_end = c.in.find("\r\n\r\n");
    if (head_end == std::string::npos)
      return;
    parse_head(c, a, head_end);
    a.head_ns = now;
  }
  if (c.chunked) {
    for (;;) {
      const auto line_end = c.in.find("\r\n", c.chunk_at);
      if (line_end == std::string::npos)
        break;
      const auto size = std::strtoull(c.in.c_str() + c.chunk_at, nullptr, 16);
      if (size == 0) {
        // Whole with the last chunk's closing CRLF (no trailers): a kept-alive connection's
        // next answer starts after it.
        c.complete = c.in.size() >= line_end + 4;
        break;
      }
      if (c.in.size() < line_end + 2 + size + 2)
        break;
      a.body.append(c.in, line_end + 2, size);
      c.chunk_at = line_end + 2 + size + 2;
    }
  } else {
    a.body.assign(c.in, c.body_at);
    if (c.content_length >= 0 && a.body.size() >= static_cast<size_t>(c.content_length))
      c.complete = true;
  }
  scan_events(c, a, now);
}

// An idle kept-alive connection the server has not closed (nothing to read, no end seen).
bool still_open(int fd) {
  char byte = 0;
  const auto r = recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

} // namespace

std::string http_post(const std::string& host, int port, const std::string& path,
                      const std::string& json_body, const std::string& headers, bool keep_alive) {
  return fmt::format("POST {} HTTP/1.1\r\nHost: {}:{}\r\nContent-Type: application/json\r\n"
                     "Content-Length: {}\r\n{}Connection: {}\r\n\r\n{}",
                     path, host, port, json_body.size(), headers,
                     keep_alive ? "keep-alive" : "close", json_body);
}

std::vector<http_answer> run_http_load(const std::vector<http_job>& jobs,
                                       const http_load_options& opt) {
  std::vector<http_answer> answers(jobs.size());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(opt.port));
  if (inet_pton(AF_INET, opt.host.c_str(), &addr.sin_addr) != 1)
    throw std::invalid_argument("http load: " + opt.host + " is not an IPv4 address");
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0)
    throw std::runtime_error(fmt::format("epoll_create1: {}", std::strerror(errno)));
  std::vector<connection> conns(jobs.size());
  size_t next = 0, open = 0; // open: connections a job is using
  std::vector<int> idle;     // keep_alive: connections whose last answer was whole
  const auto start = clock_type::now();
  for (auto& a : answers)
    a.start_clock_ns =
        std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count();
  auto elapsed = [&] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start).count();
  };
  auto finish = [&](connection& c, std::string error) {
    auto& a = answers[c.job];
    if (c.fd >= 0) {
      epoll_ctl(ep, EPOLL_CTL_DEL, c.fd, nullptr);
      if (opt.keep_alive && error.empty() && c.complete && !c.close_after)
        idle.push_back(c.fd);
      else
        close(c.fd);
      c.fd = -1;
      --open;
    }
    a.end_ns = elapsed();
    if (!error.empty() && a.error.empty())
      a.error = std::move(error);
  };
  // A connection an answer left open: watched again, now for job j.
  auto reuse = [&](size_t j) {
    while (!idle.empty()) {
      const int fd = idle.back();
      idle.pop_back();
      if (!still_open(fd)) {
        close(fd);
        continue;
      }
      conns[j].fd = fd;
      answers[j].reused = true;
      ++open;
      epoll_event ev{};
      ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
      ev.data.u64 = j;
      epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
      return true;
    }
    return false;
  };
  auto start_job = [&](size_t j) {
    auto& c = conns[j];
    c.job = j;
    answers[j].sent_ns = elapsed();
    if (opt.keep_alive && reuse(j))
      return;
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      answers[j].end_ns = answers[j].sent_ns;
      answers[j].error = fmt::format("socket: {}", std::strerror(errno));
      return;
    }
    ++open;
    const int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(c.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 &&
        errno != EINPROGRESS)
      return finish(c, fmt::format("connect: {}", std::strerror(errno)));
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = j;
    epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &ev);
  };
  std::vector<epoll_event> ready(256);
  for (;;) {
    while (next < jobs.size() && static_cast<int64_t>(jobs[next].at_ns) <= elapsed())
      start_job(next++);
    if (opt.stop && opt.stop(answers)) {
      for (auto& c : conns)
        if (c.fd >= 0)
          finish(c, "closed by the load generator");
      break;
    }
    if (next == jobs.size() && open == 0)
      break;
    int timeout_ms = 10;
    if (next < jobs.size()) {
      const auto wait_ns = static_cast<int64_t>(jobs[next].at_ns) - elapsed();
      // Rounded up: a request may start up to a millisecond late (its TTFT is timed from its
      // own connect()), where rounding down spun this thread for the last millisecond before
      // every start, a core taken from the server under test on a 2-core machine.
      timeout_ms =
          wait_ns <= 0 ? 0 : std::min<int>(10, static_cast<int>((wait_ns + 999'999) / 1'000'000));
    }
    const int n = epoll_wait(ep, ready.data(), static_cast<int>(ready.size()), timeout_ms);
    for (int i = 0; i < n; ++i) {
      auto& c = conns[ready[i].data.u64];
      if (c.fd < 0)
        continue;
      const auto& job = jobs[c.job];
      if (c.written < job.request.size() && (ready[i].events & (EPOLLOUT | EPOLLERR))) {
        int err = 0;
        socklen_t len = sizeof(err);
        getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
        if (err != 0) {
          finish(c, fmt::format("connect: {}", std::strerror(err)));
          continue;
        }
        const auto w = write(c.fd, job.request.data() + c.written, job.request.size() - c.written);
        if (w < 0 && errno != EAGAIN) {
          finish(c, fmt::format("write: {}", std::strerror(errno)));
          continue;
        }
        c.written += w > 0 ? static_cast<size_t>(w) : 0;
        if (c.written == job.request.size()) {
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLRDHUP;
          ev.data.u64 = c.job;
          epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &ev);
        }
      }
      if (!(ready[i].events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        continue;
      char buf[16384];
      bool eof = false;
      for (;;) {
        const auto r = read(c.fd, buf, sizeof(buf));
        if (r > 0) {
          c.in.append(buf, static_cast<size_t>(r));
          continue;
        }
        eof = r == 0 || errno != EAGAIN;
        break;
      }
      auto& a = answers[c.job];
      take_body(c, a, elapsed());
      if (c.complete)
        finish(c, {});
      else if (eof)
        finish(c, a.status == 0 ? "the connection closed without an answer"
                  : (c.chunked || c.content_length >= 0)
                      ? "the connection closed before the answer was whole"
                      : std::string{});
    }
  }
  for (const int fd : idle)
    close(fd);
  close(ep);
  return answers;
}

} // namespace crescent::bench
