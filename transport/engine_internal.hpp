// Internals of the transfer engine shared by its files and backends (not a public header).
#pragma once

#include "messages/errors.hpp"
#include "transport/modeled_links.hpp"
#include "transport/region_table.hpp"
#include "transport/transfer_engine.hpp"

#include <array>
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace crescent::transport {

class backend;
struct batch_state;

namespace rdma {
class responder;
} // namespace rdma

/// Counters of one path; atomics, so backends bump them without a lock.
struct path_counters {
  std::atomic<uint64_t> bytes_read{0};
  std::atomic<uint64_t> bytes_written{0};
  std::atomic<uint64_t> operations{0};
  std::atomic<uint64_t> slices{0};
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> failures{0};
};

/// One slice of one operation: the unit a backend moves.
struct slice_record {
  batch_state* batch = nullptr;
  uint32_t op = 0; // index in the batch
  op_kind kind = op_kind::read;
  std::byte* local = nullptr;
  uint64_t length = 0;
  region_handle remote;
  uint64_t remote_offset = 0; // bytes into `remote`
  bool checksum = false;
  memory_location local_location; // of `local`
  uint32_t attempts = 0;
  uint32_t path = 0;                     // index into the operation's paths
  bool ended = false;                    // asserts that a slice ends exactly once
  slice_fault fault = slice_fault::none; // injected (transfer_engine::set_fault_hook)
  bool released = false; // back from the delay line: the hook was asked for this attempt
  // Why the first path that could not carry it gave it to the next: should the next fail too,
  // the operation's reason names both (the first is usually the one that explains it).
  std::string given_way{}; // "cuda: unavailable: ..."
  // A checked write's whole-op checksum, given by the caller (transfer_op::local_checksum):
  // set only where this slice is the whole op, and used instead of hashing `local`.
  std::optional<uint64_t> known_checksum{};
};

struct op_record {
  transfer_op op;
  std::vector<backend*> paths;          // preference order
  std::vector<path_counters*> counters; // of each path to the remote node
  std::atomic<uint32_t> slices_left{0};
  uint64_t modeled_ns = 0;     // set once before it starts (modeled links only)
  bool modeled_late = false;   // ...and it would end past the batch's deadline: it times out
  std::mutex mutex;            // guards the fields below
  uint64_t fault_delay_ns = 0; // the longest injected delay of its slices (fault_delays::modeled)
  caf::error failure;
  bool timed_out = false;
  bool cancelled = false;
  op_result result; // final once slices_left reached 0
};

struct batch_state {
  uint64_t id = 0;
  transfer_engine::impl* engine = nullptr;
  clock_type::time_point deadline;
  uint64_t budget_ns = 0; // from submission to the deadline (0: it had passed)
  std::vector<std::unique_ptr<op_record>> ops;
  std::vector<slice_record> slices;
  std::atomic<size_t> ops_left{0};
  std::atomic<bool> cancelled{false};
  std::atomic<bool> expired{false};
  // While submit() starts the batch's slices: a backend may hold them back (queued, its
  // threads not woken) until flush(), and then send them all at once from the submitter.
  std::atomic<bool> launching{false};
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;       // guarded by mutex
  batch_callback callback; // set: the batch is not kept for wait/poll
};

/// A way to move bytes to or from a node. Backends call complete_slice exactly once per
/// start(), from any thread, possibly inside start().
class backend {
 public:
  virtual ~backend() = default;
  virtual const char* name() const = 0;
  /// Prepares the path to a peer; an error means this backend cannot reach it.
  virtual caf::error add_peer(const peer_info&) { return caf::none; }
  virtual void remove_peer(uint32_t) {}
  /// Whether this path can carry the operation at all; if not, its slices skip it (without
  /// spending an attempt). start() must still cope with anything (things change meanwhile).
  virtual bool can_carry(const transfer_op&) const { return true; }
  /// Whether start() may be given a slice whose local buffer is GPU memory. Operations on GPU
  /// buffers take only such paths, so the others never touch device pointers.
  virtual bool carries_device_memory() const { return false; }
  virtual void start(slice_record& s) = 0;
  /// Sends what start() held back while `b` was launching; called on the submitting thread once
  /// every slice of the batch has started.
  virtual void flush(const batch_state& b) { (void)b; }
  /// The batch's deadline passed: end its slices in flight promptly.
  virtual void expire(batch_state&) {}
  virtual void stop() {}
  /// A region was registered (it is in the table; its handle is not out yet). An error undoes
  /// the registration.
  virtual caf::error on_register(const region_handle&, std::byte*) { return caf::none; }
  /// A region was unregistered: it is out of the table and no slice of this engine uses it.
  virtual void on_unregister(const region_handle&) {}
  /// Adds what peers need to reach this engine through this path.
  virtual void advertise(peer_info&) const {}
};

struct route {
  peer_info info;
  std::vector<backend*> paths;
};

struct transfer_engine::impl {
  transfer_options options;
  std::unique_ptr<region_table> table;
  std::string host_id;
  int32_t pid = 0;
  uint16_t tcp_port = 0; // of the data-plane server, once the TCP backend listens

  std::mutex key_mutex;
  uint64_t key_state = 0;

  // Declared in the order they may be destroyed last to first: the TCP server answers RDMA
  // connects, so it goes before the RDMA backend.
  std::unique_ptr<backend> local;
  std::unique_ptr<backend> cuda;
  caf::error cuda_status; // why there is no cuda backend
  std::unique_ptr<backend> shm;
  std::unique_ptr<backend> rdma;
  rdma::responder* rdma_responder = nullptr; // the RDMA backend's, for the TCP server
  caf::error rdma_status;                    // why there is no RDMA backend
  std::unique_ptr<backend> tcp;
  slice_fault_hook fault_hook; // transfer_engine::set_fault_hook
  fault_delays fault_delay_mode = fault_delays::held;

  /// Every path this engine has, the TCP one first (stopped first, as its server's connections
  /// release the RDMA queue pairs they accepted). Route preference is another order
  /// (transfer_peers.cpp).
  std::vector<backend*> paths() const {
    std::vector<backend*> all;
    for (auto* b : {tcp.get(), rdma.get(), shm.get(), cuda.get(), local.get()})
      if (b != nullptr)
        all.push_back(b);
    return all;
  }

  mutable std::shared_mutex routes_mutex;
  std::set<uint32_t> local_nodes; // empty: every node is local (a one-process engine)
  std::unordered_map<uint32_t, std::shared_ptr<const route>> routes;

  mutable std::mutex batches_mutex;
  std::unordered_map<batch_id, std::shared_ptr<batch_state>> batches;
  uint64_t next_batch = 1;

  std::mutex watchdog_mutex;
  std::condition_variable watchdog_cv;
  std::multimap<clock_type::time_point, std::weak_ptr<batch_state>> deadlines;
  // The delay line: slices an injected delay holds until their time (fault_delays::held). A
  // held slice has not ended, so its batch stays in `batches`, alive.
  std::multimap<clock_type::time_point, slice_record*> held;
  bool stopping = false;
  std::thread watchdog;

  mutable std::mutex metrics_mutex;
  std::map<std::pair<std::string, uint32_t>, std::unique_ptr<path_counters>> counters;

  // Simulated time only (create_modeled): every operation's modeled duration comes from here.
  std::shared_ptr<modeled_links> links;

  path_counters& counters_for(const char* backend_name, uint32_t node);
  bool is_local(uint32_t node) const;
  std::vector<backend*> paths_to(uint32_t node) const;
  uint64_t next_key();
  void watch(const std::shared_ptr<batch_state>& b);
  void run_watchdog();
  /// Puts `s` in the delay line until `due`; false where the line is full.
  bool hold(slice_record& s, clock_type::time_point due);
  /// Lets the held slices of `b` go now (its deadline passed, or it was cancelled).
  void let_go(const batch_state& b);
  /// Ends the slices still held (the engine stops).
  void end_held();
};

/// Ends a slice (err: none for success). Retries transient failures on another connection or
/// path while attempts and the deadline allow; ends the operation and the batch when last.
void complete_slice(slice_record& s, caf::error err);

/// Moves one slice between its local buffer and `remote` (already checked): the in-process and
/// shared-memory paths. With a checksum, the copy is verified by hashing source and destination.
/// An injected `corrupt` (s.fault) changes bytes on the way, before the check.
caf::error copy_slice(slice_record& s, std::byte* remote);

/// Where an injected `corrupt` changes a slice of `length` bytes: 8 bytes at its middle (fewer
/// in a shorter slice).
struct corrupt_window {
  uint64_t at = 0, length = 0;
};
corrupt_window corrupt_window_of(uint64_t length);

/// What an injected `corrupt` does to a slice's bytes.
void corrupt_bytes(std::byte* bytes, uint64_t length);

/// The window's bytes of a slice's source (`length` bytes at `source`, in `where`) as
/// corrupt_bytes would leave them, for the paths that send a changed copy of them in place of
/// the source's own (TCP and RDMA writes: a fault must not change the sender's memory). GPU
/// memory is read through the host (the error is the copy's).
caf::expected<std::array<std::byte, 8>> corrupted_window(const std::byte* source, uint64_t length,
                                                         memory_location where);

/// corrupt_bytes on bytes that have landed at `where`: host memory directly, GPU memory through
/// a copy of the 8 bytes to the host and back (the error is the copy's). For the paths that
/// move bytes without touching them on the way (cuda; RDMA reads).
caf::error corrupt_landed(std::byte* bytes, uint64_t length, memory_location where);

/// Consults the fault hook (transfer_engine::set_fault_hook) as a path starts slice `s`, and
/// keeps its word in s.fault for the path to act on (corrupt). A `fail` ends the slice here with
/// io_error, and a held `delay` puts it in the delay line: then this returns true, and the path
/// must not start it (the delay line starts it again when its time comes).
bool injected_failure(slice_record& s);

/// True for failures worth another attempt: a connection or device that went away.
bool retryable(const caf::error& err);

/// How a slice or operation ends when its batch's deadline has passed.
inline caf::error deadline_passed() {
  return make_error(errc::timeout, "the batch's deadline passed");
}

std::unique_ptr<backend> make_local_backend(transfer_engine::impl& engine);
std::unique_ptr<backend> make_shm_backend(transfer_engine::impl& engine);
/// unavailable (with the reason) where the binary has no CUDA or the runtime finds no device.
caf::expected<std::unique_ptr<backend>> make_cuda_backend(transfer_engine::impl& engine);
/// Checks that [base, base + length) is memory of the GPU `where` names, inside one allocation,
/// and exports it for other processes (cuda/cuda_memory.cpp); unavailable without CUDA.
caf::expected<device_export> export_device_memory(std::byte* base, uint64_t length,
                                                  memory_location where);
caf::expected<std::unique_ptr<backend>> make_tcp_backend(transfer_engine::impl& engine);
/// Opens the RDMA devices and sets engine.rdma_responder; unavailable (with the reason) where
/// rdma-core is missing or finds no usable device.
caf::expected<std::unique_ptr<backend>> make_rdma_backend(transfer_engine::impl& engine);

} // namespace crescent::transport
