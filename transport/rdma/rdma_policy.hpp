// Decisions of the RDMA path that need no device, so that they are tested everywhere: how long
// a device pair that failed is left alone, what a work completion means for its slice, when a
// queue pair that stopped completing its work is reset or destroyed, how many queue pairs one
// control connection may hold at an owner, which service level a link can carry, and how a
// corrupted WRITE is gathered.
#pragma once

#include "messages/errors.hpp"
#include "transport/transfer_types.hpp"

#include <caf/error.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace crescent::transport::rdma {

// -- cooldown of a device pair -----------------------------------------------------------------

/// How long a path (a pair of devices to one peer) that failed is left alone: `first` after a
/// failure, doubling with each further failure up to `max`, back to nothing after a success.
/// Without it a path that cannot work (a wrong GID, a port of another fabric) would have every
/// slice create, connect and break a queue pair on it before trying the next path.
class backoff {
 public:
  using duration = clock_type::duration;
  using time_point = clock_type::time_point;

  static constexpr std::chrono::milliseconds first_default{1000};
  static constexpr std::chrono::milliseconds max_default{30000};

  backoff() : backoff(first_default, max_default) {}
  backoff(duration first, duration max);

  /// A failure at `now`: the path is down until now + the current delay, which then doubles.
  void failed(time_point now);

  /// A success: the next failure waits `first` again. A path already down stays down.
  void succeeded();

  bool down(time_point now) const { return now < until_; }
  time_point until() const { return until_; }
  duration next_delay() const { return next_; }
  uint32_t failures() const { return failures_; }

 private:
  duration first_;
  duration max_;
  duration next_;
  time_point until_{};
  uint32_t failures_ = 0;
};

// -- what a completion means ---------------------------------------------------------------------

/// Work completion statuses, as far as the path cares.
enum class wc_kind {
  success,
  flushed,       // the queue pair was in ERR (we broke it, or an earlier error did)
  remote_access, // the owner's NIC refused the key or range: a stale description
  path,          // anything else: the transport or the queue pair failed
};

struct wc_outcome {
  caf::error err;             // none: the slice succeeded
  bool cool_down = false;     // put the device pair into its cooldown
  bool invalidate = false;    // forget the region's description; the owner is asked again
  bool first_success = false; // the queue pair's first success: the device pair works
};

/// What one completion means for its slice and for the path. `ever_succeeded`: the queue pair
/// completed work before; `broken_code`: why the queue pair was broken, for flushed work
/// (io_error: retried on the same path; unavailable: moved on to the next path).
///
/// A queue pair whose first work fails on the path (not a refused key) never worked: its
/// device pair goes into cooldown and its slices move on to the next path as unavailable
/// rather than retrying a path that cannot carry them. Work of an expired or cancelled batch
/// ends as timed out or cancelled, whatever the NIC said.
wc_outcome judge_completion(wc_kind kind, bool ever_succeeded, errc broken_code, bool expired,
                            bool cancelled, const std::string& context);

// -- queue pairs that stop completing ----------------------------------------------------------

/// Bounds on waiting for a NIC, so that no slice waits forever for a completion.
struct sweep_limits {
  /// A broken queue pair flushes what it has in flight at once; if its flushes have not all
  /// come this long after it broke, it is destroyed (the NIC stops touching its buffers when
  /// ibv_destroy_qp returns) and its work ends.
  std::chrono::milliseconds flush_timeout{1000};
  /// In-flight work of an expired batch is left to complete (a request on the wire cannot be
  /// taken back without resetting the queue pair, which would fail other batches' work too).
  /// If it is still in flight this long after its deadline, the queue pair is presumed stuck
  /// and reset.
  std::chrono::milliseconds expired_grace{500};
};

enum class sweep_action { none, reset, destroy };

/// What to do with a queue pair now. `in_flight`: its posted requests not yet completed;
/// `broken_at`: set once it is broken; `oldest_expired_deadline`: the earliest deadline of an
/// expired batch with work in flight on it, if any.
sweep_action decide_sweep(size_t in_flight, std::optional<clock_type::time_point> broken_at,
                          std::optional<clock_type::time_point> oldest_expired_deadline,
                          clock_type::time_point now, const sweep_limits& limits);

// -- queue pairs an owner accepts ----------------------------------------------------------------

/// Counts of the queue pairs an owner created for connect requests, per control connection
/// and in all: each is a NIC resource the initiator asked for, so each connection gets a
/// bounded share. Not thread-safe: the caller locks.
class qp_quota {
 public:
  qp_quota(size_t per_owner_max, size_t total_max)
      : per_owner_max_(per_owner_max), total_max_(total_max) {}

  /// Takes one for `owner`; no_space with which limit was reached otherwise.
  caf::error take(const void* owner);

  /// Gives one of `owner`'s back (a queue pair released or that could not be created).
  void give_back(const void* owner);

  /// Gives back all of `owner`'s (its connection ended).
  void give_back_all(const void* owner);

  void clear();

  size_t held(const void* owner) const;
  size_t total() const { return total_; }
  size_t per_owner_max() const { return per_owner_max_; }
  size_t total_max() const { return total_max_; }

 private:
  size_t per_owner_max_;
  size_t total_max_;
  std::unordered_map<const void*, size_t> held_;
  size_t total_ = 0;
};

// -- links ---------------------------------------------------------------------------------------

/// The service level a link carries: InfiniBand has 16 (0..15); RoCE maps it to the 802.1p
/// priority of its VLAN tag, which has 3 bits, so it is clamped to 7 there (a larger value
/// makes ibv_modify_qp refuse the queue pair on some providers, and wraps on others).
uint8_t effective_service_level(uint8_t link_layer, uint8_t service_level);

/// The access a queue pair grants the other end (ibv_qp_attr::qp_access_flags). Ours only
/// issue READ and WRITE and never serve the peer's, so an initiator's queue pair grants none:
/// a peer that learned its number could not use it to reach our memory. Only the owner's ends,
/// which serve the initiator's READs and WRITEs, allow remote reads and writes.
inline constexpr int access_remote_write = 2; // = IBV_ACCESS_REMOTE_WRITE
inline constexpr int access_remote_read = 4;  // = IBV_ACCESS_REMOTE_READ
enum class qp_role { initiator, responder };
int qp_access_flags(qp_role role);

/// Why a device of this transport (ibv_device::transport_type) cannot carry this path, or
/// empty if it can. Only InfiniBand-transport devices (InfiniBand and RoCE NICs) can: iWARP
/// needs a connection manager handshake and cannot take queue pairs connected by hand,
/// usNIC speaks UDP without RDMA READ or WRITE, and an unknown transport is not trusted.
std::string unsupported_transport(int transport_type);
inline constexpr int transport_infiniband = 0;  // = IBV_TRANSPORT_IB
inline constexpr int transport_iwarp = 1;       // = IBV_TRANSPORT_IWARP
inline constexpr int transport_usnic = 2;       // = IBV_TRANSPORT_USNIC
inline constexpr int transport_usnic_udp = 3;   // = IBV_TRANSPORT_USNIC_UDP
inline constexpr int transport_unspecified = 4; // = IBV_TRANSPORT_UNSPECIFIED

// -- a WRITE that a fault corrupts --------------------------------------------------------------

/// One gather entry of a work request (an ibv_sge): its address, bytes and local key.
struct gather_part {
  uint64_t address = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
  bool operator==(const gather_part&) const = default;
};
struct gather_list {
  std::array<gather_part, 3> parts{};
  uint32_t count = 0;
};

/// The gather list of a WRITE of `length` bytes at `source` (key `lkey`) whose bytes
/// [at, at + window) go out from `changed` (key `changed_lkey`) instead: the source before
/// them, the changed bytes, the source after them, parts of no bytes left out. So the NIC
/// sends the changed bytes where the source's would go, and the source is not touched.
/// Requires at + window <= length <= 2^32 - 1 (a slice fits one work request).
gather_list gather_around(uint64_t source, uint64_t length, uint32_t lkey, uint64_t at,
                          uint64_t window, uint64_t changed, uint32_t changed_lkey);

} // namespace crescent::transport::rdma
