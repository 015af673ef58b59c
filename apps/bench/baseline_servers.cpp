#include "apps/bench/baseline_servers.hpp"

#include "messages/errors.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#ifdef CRESCENT_HAVE_LIBMEMCACHED
#include <libmemcached/memcached.h>
#endif
#ifdef CRESCENT_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

namespace crescent::bench {

namespace {

// A program on PATH, or in the sbin folders Debian puts daemons in.
std::optional<std::string> find_program(const std::string& name) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/usr/local/sbin";
  size_t at = 0;
  while (at <= path.size()) {
    size_t end = path.find(':', at);
    if (end == std::string::npos)
      end = path.size();
    auto candidate = path.substr(at, end - at) + "/" + name;
    if (end > at && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    at = end + 1;
  }
  return std::nullopt;
}

// A port nobody listens on now (the server binds it right after; a clash fails its start).
caf::expected<uint16_t> free_port() {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int e = errno;
    if (fd >= 0)
      close(fd);
    return make_error(errc::io_error, std::string{"cannot pick a free port: "} + strerror(e));
  }
  close(fd);
  return ntohs(a.sin_port);
}

// Waits (at most 10 s) until the server accepts connections.
caf::error await_listening(uint16_t port, const std::string& name) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    const bool up = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    close(fd);
    if (up)
      return caf::none;
    poll(nullptr, 0, 20); // the server is starting in another process
  }
  return make_error(errc::timeout, name + " did not listen on port " + std::to_string(port));
}

std::string key_text(block_key key) {
  return "k" + to_string(key);
}

caf::expected<baseline_server> start(const std::string& name, const std::string& program,
                                     std::vector<std::string> args, uint16_t port) {
  auto bin = find_program(program);
  if (!bin)
    return make_error(errc::unavailable,
                      program + " is not installed (tools/setup.sh installs it)");
  auto p = child_process::spawn(*bin, args);
  if (!p)
    return std::move(p.error());
  if (auto err = await_listening(port, name))
    return err;
  baseline_server s;
  s.name = name;
  s.port = port;
  s.process.emplace(std::move(*p));
  return s;
}

#ifdef CRESCENT_HAVE_LIBMEMCACHED
class memcached_client final : public kv_client {
 public:
  explicit memcached_client(memcached_st* m) : m_(m) {}
  ~memcached_client() override { memcached_free(m_); }

  caf::error put(block_key key, std::span<const std::byte> value) override {
    auto k = key_text(key);
    auto rc = memcached_set(m_, k.data(), k.size(), reinterpret_cast<const char*>(value.data()),
                            value.size(), 0, 0);
    if (rc != MEMCACHED_SUCCESS)
      return make_error(errc::io_error,
                        std::string{"memcached set: "} + memcached_strerror(m_, rc));
    return caf::none;
  }

  caf::expected<bool> get(block_key key, std::span<std::byte> out) override {
    auto k = key_text(key);
    size_t len = 0;
    uint32_t flags = 0;
    memcached_return_t rc;
    char* v = memcached_get(m_, k.data(), k.size(), &len, &flags, &rc);
    if (rc == MEMCACHED_NOTFOUND)
      return false;
    if (rc != MEMCACHED_SUCCESS || v == nullptr) {
      std::free(v);
      return make_error(errc::io_error,
                        std::string{"memcached get: "} + memcached_strerror(m_, rc));
    }
    const bool fits = len == out.size();
    if (fits)
      std::memcpy(out.data(), v, len);
    std::free(v);
    return fits;
  }

 private:
  memcached_st* m_;
};
#endif

#ifdef CRESCENT_HAVE_HIREDIS
class redis_client final : public kv_client {
 public:
  explicit redis_client(redisContext* c) : c_(c) {}
  ~redis_client() override { redisFree(c_); }

  caf::error put(block_key key, std::span<const std::byte> value) override {
    auto k = key_text(key);
    auto* r = static_cast<redisReply*>(
        redisCommand(c_, "SET %b %b", k.data(), k.size(), value.data(), value.size()));
    if (r == nullptr)
      return make_error(errc::io_error, std::string{"redis SET: "} + c_->errstr);
    const bool ok = r->type == REDIS_REPLY_STATUS;
    freeReplyObject(r);
    return ok ? caf::error{} : make_error(errc::io_error, "redis SET was refused");
  }

  caf::expected<bool> get(block_key key, std::span<std::byte> out) override {
    auto k = key_text(key);
    auto* r = static_cast<redisReply*>(redisCommand(c_, "GET %b", k.data(), k.size()));
    if (r == nullptr)
      return make_error(errc::io_error, std::string{"redis GET: "} + c_->errstr);
    const bool hit = r->type == REDIS_REPLY_STRING && static_cast<size_t>(r->len) == out.size();
    if (hit)
      std::memcpy(out.data(), r->str, out.size());
    freeReplyObject(r);
    return hit;
  }

 private:
  redisContext* c_;
};
#endif

} // namespace

caf::expected<baseline_server> start_memcached(uint64_t memory_mib, uint64_t value_bytes_max) {
#ifdef CRESCENT_HAVE_LIBMEMCACHED
  auto port = free_port();
  if (!port)
    return std::move(port.error());
  const uint64_t item_mib = std::max<uint64_t>(1, (value_bytes_max + 4095) / (1 << 20) + 1);
  std::vector<std::string> args{"-l", "127.0.0.1",
                                "-p", std::to_string(*port),
                                "-U", "0",
                                "-m", std::to_string(memory_mib),
                                "-I", std::to_string(item_mib) + "m",
                                "-c", "1024"};
  if (geteuid() == 0)
    args.insert(args.end(), {"-u", "root"}); // memcached refuses to run as root otherwise
  auto s = start("memcached", "memcached", args, *port);
  if (!s)
    return s;
  const uint16_t p = s->port;
  s->connect = [p]() -> caf::expected<std::unique_ptr<kv_client>> {
    memcached_st* m = memcached_create(nullptr);
    if (m == nullptr || memcached_server_add(m, "127.0.0.1", p) != MEMCACHED_SUCCESS) {
      if (m != nullptr)
        memcached_free(m);
      return make_error(errc::io_error, "libmemcached cannot add the server");
    }
    memcached_behavior_set(m, MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    return std::unique_ptr<kv_client>{new memcached_client(m)};
  };
  return s;
#else
  (void)memory_mib;
  (void)value_bytes_max;
  return make_error(errc::unavailable, "built without libmemcached (libmemcached-dev)");
#endif
}

caf::expected<baseline_server> start_redis(uint64_t memory_mib) {
#ifdef CRESCENT_HAVE_HIREDIS
  auto port = free_port();
  if (!port)
    return std::move(port.error());
  auto s = start("redis", "redis-server",
                 {"--port", std::to_string(*port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--protected-mode", "no", "--loglevel", "warning",
                  "--maxmemory", std::to_string(memory_mib) + "mb", "--daemonize", "no"},
                 *port);
  if (!s)
    return s;
  const uint16_t p = s->port;
  s->connect = [p]() -> caf::expected<std::unique_ptr<kv_client>> {
    redisContext* c = redisConnect("127.0.0.1", p);
    if (c == nullptr || c->err != 0) {
      std::string why = c != nullptr ? c->errstr : "out of memory";
      if (c != nullptr)
        redisFree(c);
      return make_error(errc::io_error, "cannot connect to redis: " + why);
    }
    return std::unique_ptr<kv_client>{new redis_client(c)};
  };
  return s;
#else
  (void)memory_mib;
  return make_error(errc::unavailable, "built without hiredis (libhiredis-dev)");
#endif
}

} // namespace crescent::bench
