#include "apps/up/message_gate.hpp"

#include "messages/errors.hpp"

#include <caf/atom.hpp>
#include <caf/binary_serializer.hpp>
#include <caf/message_id.hpp>
#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace crescent::up {

namespace {

using gate_clock = std::chrono::steady_clock;

// BASP 0.17 (caf/io/basp/header.hpp): operation, two pad bytes, flags, payload length (u32),
// operation data (u64: the message id of a message), source and destination actor (u64 each),
// in network byte order.
constexpr uint8_t direct_message = 0x02;
constexpr uint8_t routed_message = 0x03;

uint64_t load_be(const std::byte* p, size_t n) {
  uint64_t x = 0;
  for (size_t i = 0; i < n; ++i)
    x = (x << 8) | std::to_integer<uint64_t>(p[i]);
  return x;
}

bool is_name_char(std::byte b) {
  const auto c = std::to_integer<unsigned char>(b);
  return c >= 0x21 && c <= 0x7e;
}

// CAF 0.17 writes a message as the names of its element types, "@<>+@atom+crescent...", behind
// a varbyte length, then the elements. The leading atom, where the first type is "@atom".
std::string leading_atom(std::span<const std::byte> payload) {
  static constexpr char marker[] = "@<>+";
  const auto at =
      std::search(payload.begin(), payload.end(), reinterpret_cast<const std::byte*>(marker),
                  reinterpret_cast<const std::byte*>(marker) + 4);
  if (at == payload.end())
    return {};
  const size_t start = static_cast<size_t>(at - payload.begin());
  size_t end = start;
  while (end < payload.size() && is_name_char(payload[end]))
    ++end;
  const std::string_view names{reinterpret_cast<const char*>(&payload[start]), end - start};
  if (names.rfind("@<>+@atom", 0) != 0 || (names.size() > 9 && names[9] != '+') ||
      end + 8 > payload.size())
    return {};
  const auto value = static_cast<caf::atom_value>(load_be(&payload[end], 8));
  return caf::to_string(value);
}

} // namespace

uint32_t frame_payload_bytes(std::span<const std::byte, 32> header) {
  return static_cast<uint32_t>(load_be(&header[4], 4));
}

std::optional<frame_view> read_frame(std::span<const std::byte> frame) {
  if (frame.size() < frame_header_bytes)
    return std::nullopt;
  const auto payload = frame_payload_bytes(frame.first<32>());
  if (frame.size() < frame_header_bytes + payload)
    return std::nullopt;
  frame_view out;
  const auto op = std::to_integer<uint8_t>(frame[0]);
  out.message = op == direct_message || op == routed_message;
  out.routed = op == routed_message;
  out.source_actor = load_be(&frame[16], 8);
  out.dest_actor = load_be(&frame[24], 8);
  if (!out.message)
    return out;
  const uint64_t mid = load_be(&frame[8], 8);
  if ((mid & caf::message_id::response_flag_mask) != 0)
    out.type = "reply";
  else
    out.type = leading_atom(frame.subspan(frame_header_bytes, payload));
  return out;
}

void gate_directory::add_place(const caf::node_id& node, int32_t place) {
  std::vector<char> buf;
  caf::binary_serializer sink{static_cast<caf::execution_unit*>(nullptr), buf};
  auto copy = node;
  if (sink(copy))
    return; // not serializable: frames from there stay of no known place
  std::vector<std::byte> bytes(buf.size());
  std::memcpy(bytes.data(), buf.data(), buf.size());
  places.emplace_back(std::move(bytes), place);
}

std::optional<std::pair<int32_t, size_t>>
gate_directory::place_at(std::span<const std::byte> bytes) const {
  for (const auto& [id, place] : places)
    if (bytes.size() >= id.size() && std::equal(id.begin(), id.end(), bytes.begin()))
      return std::make_pair(place, id.size());
  return std::nullopt;
}

std::string gate_directory::role_of(int32_t place, uint64_t actor) const {
  if (auto i = roles.find({place, actor}); i != roles.end())
    return i->second;
  return place == main_place ? "request" : "";
}

// -- the relay --------------------------------------------------------------------------------

struct message_gate::relay {
  // One direction of one connection: bytes read and not yet framed, bytes to write, frames held.
  struct direction {
    int from = -1, to = -1;
    bool from_node = false;
    std::vector<std::byte> in;
    std::vector<std::byte> out;
    std::multimap<gate_clock::time_point, std::vector<std::byte>> held;
  };
  struct link {
    direction up, down; // up: main -> node; down: node -> main
    bool closed = false;
  };

  uint32_t node = 0;
  std::string host;
  uint16_t port = 0;
  std::vector<fault> faults;
  std::mt19937_64 rng;
  int listener = -1;
  int wake = -1;
  std::thread thread;
  std::vector<std::unique_ptr<link>> links;
  mutable std::mutex mutex; // active, counts
  std::set<size_t> active;
  std::shared_ptr<const gate_directory> directory;
  gate_counts counts;
  std::atomic<bool> stopping{false};
  size_t held_now = 0;

  ~relay() {
    stopping = true;
    if (wake >= 0) {
      uint64_t one = 1;
      [[maybe_unused]] auto n = ::write(wake, &one, sizeof one);
    }
    if (thread.joinable())
      thread.join();
    for (auto& l : links)
      close_link(*l);
    for (int fd : {listener, wake})
      if (fd >= 0)
        ::close(fd);
  }

  static void close_link(link& l) {
    if (l.closed)
      return;
    ::close(l.up.from);
    ::close(l.up.to);
    l.closed = true;
  }

  caf::expected<int> connect_target() const {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
      return make_error(errc::unavailable, fmt::format("message gate: cannot resolve {}: {}", host,
                                                       ::gai_strerror(rc)));
    std::string why = "no address";
    for (auto* a = found; a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        ::freeaddrinfo(found);
        return fd;
      }
      why = std::strerror(errno);
      if (fd >= 0)
        ::close(fd);
    }
    ::freeaddrinfo(found);
    return make_error(errc::unavailable,
                      fmt::format("message gate: cannot reach {}:{}: {}", host, port, why));
  }

  void accept_one() {
    int client = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
      return;
    auto target = connect_target();
    if (!target || links.size() >= gate_connections_max) {
      ::close(client);
      if (target)
        ::close(*target);
      return;
    }
    for (int fd : {client, *target}) {
      ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    auto l = std::make_unique<link>();
    l->up.from = client;
    l->up.to = *target;
    l->down.from = *target;
    l->down.to = client;
    l->down.from_node = true;
    links.push_back(std::move(l));
  }

  // A frame's two ends: the place of each process and the role of each actor. Places unknown
  // (no directory yet, or a routed frame whose node ids it does not know) are nullopt.
  struct frame_ends {
    std::optional<int32_t> source, dest;
    std::string source_role, dest_role;
  };

  frame_ends ends_of(const frame_view& v, std::span<const std::byte> frame, bool from_node) const {
    frame_ends out;
    const auto self = static_cast<int32_t>(node);
    if (!v.routed) {
      out.source = from_node ? self : main_place;
      out.dest = from_node ? main_place : self;
    } else if (directory) {
      auto payload = frame.subspan(frame_header_bytes);
      if (auto s = directory->place_at(payload)) {
        out.source = s->first;
        if (auto d = directory->place_at(payload.subspan(s->second)))
          out.dest = d->first;
      }
    }
    if (directory && out.source && out.dest) {
      out.source_role = directory->role_of(*out.source, v.source_actor);
      out.dest_role = directory->role_of(*out.dest, v.dest_actor);
    }
    return out;
  }

  // Whether fault `f` takes this frame (as simulated time matches a message: fault_injector).
  static bool matches(const message_match& m, const frame_view& v, const frame_ends& e) {
    return m.takes(v.type, e.source_role, e.dest_role, e.source, e.dest);
  }

  // Where a frame goes: dropped (nothing), now, or held until a time; and how many copies.
  // Each frame is decided once: a frame that another node sent through the main process was
  // decided at that node's gate.
  void route(direction& d, std::vector<std::byte> frame) {
    auto view = read_frame(frame);
    gate_clock::duration hold{};
    gate_clock::duration copy_late{}; // the second copy's own lateness (duplicate's delay_ms)
    size_t copies = 1;
    if (view && view->message && (d.from_node || !view->routed)) {
      std::lock_guard<std::mutex> guard{mutex};
      ++counts.frames;
      const auto ends = ends_of(*view, frame, d.from_node);
      std::uniform_real_distribution<double> draw{0.0, 1.0};
      for (auto i : active) {
        const auto& f = faults[i];
        if (!matches(f.match, *view, ends) || draw(rng) >= f.probability)
          continue;
        switch (f.kind) {
        case fault_kind::drop:
          ++counts.dropped;
          return;
        case fault_kind::duplicate:
          ++counts.duplicated;
          copies = 2;
          copy_late =
              std::max<gate_clock::duration>(copy_late, std::chrono::milliseconds(f.delay_ms));
          break;
        case fault_kind::delay:
          ++counts.delayed;
          hold += std::chrono::milliseconds(f.delay_ms);
          break;
        case fault_kind::reorder: {
          ++counts.reordered;
          std::uniform_int_distribution<uint64_t> ms{1, std::max<uint64_t>(f.delay_ms, 1)};
          hold += std::chrono::milliseconds(ms(rng));
          break;
        }
        default:
          break;
        }
      }
      if (hold.count() > 0 && held_now >= gate_held_frames_max) {
        ++counts.overflow;
        hold = {};
      }
    }
    for (size_t c = 0; c < copies; ++c) {
      auto late = hold;
      if (c > 0 && held_now < gate_held_frames_max) // past the limit, a copy goes with its original
        late += copy_late;
      if (late.count() > 0) {
        d.held.emplace(gate_clock::now() + late, frame);
        ++held_now;
      } else {
        d.out.insert(d.out.end(), frame.begin(), frame.end());
      }
    }
  }

  // Reads what the socket has and routes each whole frame; false: the connection ended or a
  // frame was over the limit.
  bool read_side(direction& d) {
    std::byte buf[64 * 1024];
    for (;;) {
      const auto n = ::read(d.from, buf, sizeof buf);
      if (n == 0)
        return false;
      if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      d.in.insert(d.in.end(), buf, buf + n);
      if (!route_whole_frames(d))
        return false;
    }
  }

  // Routes every whole frame at the front of d.in, then drops their bytes at once; false: a
  // frame announced more than the limit.
  bool route_whole_frames(direction& d) {
    size_t used = 0;
    bool ok = true;
    while (d.in.size() - used >= frame_header_bytes) {
      const size_t size =
          frame_header_bytes + frame_payload_bytes(std::span<const std::byte, 32>{&d.in[used], 32});
      if (size > gate_frame_bytes_max) {
        ok = false;
        break;
      }
      if (d.in.size() - used < size)
        break;
      route(d, std::vector<std::byte>(d.in.begin() + static_cast<ptrdiff_t>(used),
                                      d.in.begin() + static_cast<ptrdiff_t>(used + size)));
      used += size;
    }
    d.in.erase(d.in.begin(), d.in.begin() + static_cast<ptrdiff_t>(used));
    return ok;
  }

  bool write_side(direction& d) {
    while (!d.out.empty()) {
      const auto n = ::write(d.to, d.out.data(), d.out.size());
      if (n < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR;
      d.out.erase(d.out.begin(), d.out.begin() + n);
    }
    return true;
  }

  // Frames whose time came join the output, in time order; the time of the next one.
  std::optional<gate_clock::time_point> release(direction& d) {
    const auto now = gate_clock::now();
    while (!d.held.empty() && d.held.begin()->first <= now) {
      auto& frame = d.held.begin()->second;
      d.out.insert(d.out.end(), frame.begin(), frame.end());
      d.held.erase(d.held.begin());
      --held_now;
    }
    if (d.held.empty())
      return std::nullopt;
    return d.held.begin()->first;
  }

  int poll_timeout_ms() {
    std::optional<gate_clock::time_point> next;
    for (auto& l : links)
      for (auto* d : {&l->up, &l->down})
        if (auto t = release(*d); t && (!next || *t < *next))
          next = t;
    if (!next)
      return 1000;
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - gate_clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(ms, 0, 1000));
  }

  void run() {
    while (!stopping) {
      const int timeout = poll_timeout_ms();
      std::vector<pollfd> fds{{listener, POLLIN, 0}, {wake, POLLIN, 0}};
      for (auto& l : links) {
        fds.push_back({l->up.from, POLLIN, 0});
        fds.push_back({l->down.from, POLLIN, 0});
        fds.back().events |= l->up.out.empty() ? 0 : POLLOUT; // up writes to the node: down.from
        fds[fds.size() - 2].events |= l->down.out.empty() ? 0 : POLLOUT;
      }
      if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR)
        return;
      if (fds[0].revents & POLLIN)
        accept_one();
      serve_links(fds);
      links.erase(std::remove_if(links.begin(), links.end(), [](auto& l) { return l->closed; }),
                  links.end());
    }
  }

  void serve_links(const std::vector<pollfd>& fds) {
    for (size_t i = 0; i < links.size() && 2 + 2 * i + 1 < fds.size(); ++i) {
      auto& l = *links[i];
      const auto client = fds[2 + 2 * i].revents;
      const auto target = fds[2 + 2 * i + 1].revents;
      bool ok = true;
      if (client & (POLLIN | POLLHUP | POLLERR))
        ok = read_side(l.up) && ok;
      if (target & (POLLIN | POLLHUP | POLLERR))
        ok = read_side(l.down) && ok;
      release(l.up);
      release(l.down);
      ok = write_side(l.up) && write_side(l.down) && ok;
      if (!ok) {
        held_now -= l.up.held.size() + l.down.held.size();
        close_link(l);
      }
    }
  }
};

caf::expected<std::unique_ptr<message_gate>> message_gate::start(uint32_t node, std::string host,
                                                                 uint16_t port,
                                                                 std::vector<fault> faults,
                                                                 uint64_t seed) {
  std::unique_ptr<message_gate> gate{new message_gate};
  auto r = std::make_unique<relay>();
  r->node = node;
  r->host = std::move(host);
  r->port = port;
  r->faults = std::move(faults);
  r->rng.seed(seed ^ (0x9e3779b97f4a7c15ull * (node + 1)));
  r->listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  r->wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (r->listener < 0 || r->wake < 0 ||
      ::bind(r->listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(r->listener, 16) != 0 ||
      ::getsockname(r->listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return make_error(errc::io_error,
                      fmt::format("message gate of node {}: {}", node, std::strerror(errno)));
  gate->node_ = node;
  gate->port_ = ntohs(addr.sin_port);
  auto* raw = r.get();
  r->thread = std::thread([raw] { raw->run(); });
  gate->relay_ = std::move(r);
  return gate;
}

message_gate::~message_gate() = default;

void message_gate::activate(size_t index) {
  std::lock_guard<std::mutex> guard{relay_->mutex};
  if (index < relay_->faults.size() && relay_->faults[index].is_message_fault())
    relay_->active.insert(index);
}

void message_gate::deactivate(size_t index) {
  std::lock_guard<std::mutex> guard{relay_->mutex};
  relay_->active.erase(index);
}

void message_gate::set_directory(std::shared_ptr<const gate_directory> directory) {
  std::lock_guard<std::mutex> guard{relay_->mutex};
  relay_->directory = std::move(directory);
}

gate_counts message_gate::counts() const {
  std::lock_guard<std::mutex> guard{relay_->mutex};
  return relay_->counts;
}

} // namespace crescent::up
