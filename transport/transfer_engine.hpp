// The transfer engine: registered memory, and batches of one-sided reads and writes through
// region handles. KV bytes move here, never through actor mailboxes.
//
// Paths, chosen per remote node, in this order of preference: operations on GPU memory on this
// host -> cuda (below); the same process -> an in-process
// copy; the same host -> shared memory (the initiator maps the owner's memfd and copies); RDMA
// where both engines have a device that can reach the other's; TCP to the owner's data-plane
// server. Operations are cut into slices (transfer_options::slice_bytes) that may take
// different connections; a slice that fails for a transient reason (a lost connection, say) is
// retried on another connection or path while attempts and the deadline allow, and a path that
// cannot carry a slice at all (unavailable) hands it to the next one.
//
// RDMA (one-sided READ and WRITE over reliable-connected queue pairs):
// - Every region is also registered with every RDMA device the engine opened; registration
//   fails if a device refuses the memory (see ulimit -l). Unregistering deregisters it.
// - The local buffer of an operation must lie inside a region registered with this engine: the
//   NIC can only move registered memory. Other operations skip the RDMA path (one whose region
//   goes away meanwhile gets unavailable from it) and take the next one, TCP.
// - Operations with checksum = true take the next path too: one-sided RDMA runs no code at the
//   owner that could hash the bytes (the links' own CRCs still cover every packet).
// - Handles are checked by the owner when a region is first used (its address and remote keys
//   come back over the TCP server) and by the initiator on each use after that; a remote key
//   grants the NIC access to the whole region, so a peer's engine is trusted to keep to its
//   handles, as a peer with the region's access key is anyway. A grant (grant() below) is
//   described on its own, once per grant, with its region's remote keys: the NIC enforces the
//   region, not the grant.
// - A region unregistered while a peer still addresses it makes that peer's NIC report an
//   access error (the peer then asks again and gets not_found); as with shared memory, a
//   protocol above must keep regions registered while peers may still use them.
// - A port's new LID or GID (from the subnet manager, or a RoCE interface's new IP address) is
//   used by queue pairs set up after the change; those set up before fail with their next work
//   and are replaced. A port left without an address (no LID yet, no RoCE GID) takes no new
//   work until an event brings one; with rdma_gid_index -1 the best RoCE GID is chosen again.
// - A deadline ends RDMA work in flight by moving its queue pairs to the error state: the NIC
//   stops and reports every request, after which no byte of the batch moves.
// - The RDMA path is off (see rdma_status) where rdma-core finds no device with an active port,
//   where enable_rdma or enable_tcp is off (queue pairs are set up through the TCP server).
// For TCP, operations run on the engine's connection threads, except that a batch's read
// requests go out from the submitting thread when their connection is idle (a non-blocking
// send: submit never waits on the network); for RDMA, on the NICs, completed on one thread per
// device.
//
// GPU memory (the cuda path). Not yet run on a GPU: built and tested (the GPU tests skip) on
// machines without one, against the CUDA 12/13 documentation.
// - register_region(node, base, length, memory_location::cuda(d)) registers memory of CUDA
//   device d of this process: all of it must be device memory of d (cudaPointerGetAttributes)
//   inside one allocation. Where the allocation came from cudaMalloc it is also exported for
//   CUDA IPC (its handle and the region's offset in it go into the region table); other memory
//   (cuMemCreate, memory pools, cudaMallocAsync) is usable from this process only, and peers
//   get unavailable. Managed and host-pinned memory are refused: register them as cpu memory.
// - An operation whose local buffer is GPU memory says so in transfer_op::local_location; only
//   the cuda path takes it. The cuda path carries operations that involve GPU memory (the local
//   buffer or the remote region), to regions of this process (from the engine's own table) and
//   of other processes on this host (their region tables, GPU regions opened with
//   cudaIpcOpenMemHandle and cached until remove_peer or the engine's end, host regions through
//   their memfd segments). Host-only operations never take it.
// - Copies are cudaMemcpyAsync (cudaMemcpyDefault, unified addressing) on the engine's own
//   streams, waited for before the slice ends: as other copy paths, a slice is done when submit
//   returns. The calling thread's current device is set for each copy and restored after.
//   Work the caller queued on its own streams that produces or consumes those bytes must be
//   finished (synchronized) before submit, and is not ordered with the engine's copies.
// - Refused: GPU regions from another host (the TCP server and RDMA answer unavailable, "GPU
//   regions are reachable only from the same host"; GPUDirect RDMA is out of scope, so GPU
//   regions are never registered with NICs); operations on GPU memory with checksum = true
//   (there is no host copy to hash: invalid_argument for a GPU buffer, for a GPU region the
//   cuda path's refusal); a GPU buffer with no cuda path (unavailable, with cuda_status()).
// - Without CUDA in the binary, without a driver or device, or with enable_cuda off, there is
//   no cuda path: registering GPU memory fails with unavailable and the reason (cuda_status).
// - A failed copy (a CUDA error) fails its slice with io_error and the CUDA error's name; the
//   destination range of that slice then holds unknown bytes, as for any failed write.
// - A peer's allocation stays opened (cudaIpcOpenMemHandle) here until remove_peer or the
//   engine's end: the owner must not cudaFree memory a peer may still have open (CUDA leaves
//   that undefined), which the protocol above (leases) covers as for host regions.
//
// Contract:
// - Every operation ends: completed, failed with a reason, timed out at the batch's deadline, or
//   cancelled. wait() returns only once no slice of the batch can touch its local buffers again.
//   At the deadline, TCP connections carrying the batch's slices (sent, awaiting an answer, or
//   in the middle of a read's payload) are cut, whatever the peer does; slices cut off this way
//   end timed_out. A data-plane server drops a peer silent in the middle of a request, or
//   taking no byte of a response in one send, for transfer_options::tcp_peer_silence_max.
// - add_peer for nodes already known: the same process (address and pid) keeps its
//   connections; another one replaces them, and their slices fail over to the new ones.
// - Refusals touch nothing: a handle whose key does not match, or an operation outside its
//   handle, or a handle outside its region, is refused before any byte moves, by every path.
// - Shared-memory files (region tables, the memfds of host_memory) are sealed against shrinking
//   and growing; a peer's file that is not sealed, or smaller than advertised, is not mapped
//   (the shm path answers unavailable and the next path takes the operation), since a file that
//   shrank under a mapping would fault this process.
// - A region's memory must stay mapped until unregister_region returns. Unregistering waits for
//   this process's copies in flight; a shared-memory copy another process started just before
//   may still finish (a protocol above, such as a lease, must cover that).
// - Operations on in-process and shared-memory paths are copied by the submitting thread before
//   submit returns; TCP operations run on the engine's connection threads.
// - All calls are thread-safe.
#pragma once

#include "transport/modeled_links.hpp"
#include "transport/transfer_types.hpp"

#include <caf/expected.hpp>

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace crescent::transport {

using batch_id = uint64_t;

/// Checks options as transfer_engine::create does (every limit), without starting anything:
/// invalid_argument naming the option, or none.
caf::error check_transfer_options(const transfer_options& options);

using batch_callback = std::function<void(std::vector<op_result>)>;

/// Fault injection (docs/faults.md): what happens to one slice of an operation.
enum class slice_fault : uint8_t {
  none,
  fail,    // the slice fails (io_error), as a lost connection mid-transfer would end it
  corrupt, // 8 bytes of the destination change on the way (the source's do not): a slice
           // with a checksum fails with checksum_mismatch; one without arrives changed
  delay,   // the slice starts slice_verdict::delay later, as over a congested link
};

/// The longest delay a fault hook may give one slice; a longer one is cut to it.
inline constexpr std::chrono::milliseconds slice_delay_max{3'600'000};

/// A fault hook's word on one slice.
struct slice_verdict {
  slice_fault fault = slice_fault::none;
  std::chrono::nanoseconds delay{0}; // slice_fault::delay only
  slice_verdict() = default;
  slice_verdict(slice_fault f) : fault(f) {} // NOLINT: a bare fault is a verdict without delay
  slice_verdict(slice_fault f, std::chrono::nanoseconds d) : fault(f), delay(d) {}
};

/// How an engine carries out a delayed slice (transfer_engine::set_fault_hook).
enum class fault_delays : uint8_t {
  held,    // the slice waits on the steady clock in the engine's delay line, then starts
  modeled, // the bytes move at once; the operation's op_result::modeled_ns grows by the delay
};

/// A slice as a fault hook sees it.
struct slice_view {
  op_kind kind = op_kind::read;
  uint32_t remote_node = 0;
  uint64_t length_bytes = 0;
};

using slice_fault_hook = std::function<slice_verdict(const slice_view&)>;

/// Slices that may wait in one engine's delay line at once; one more starts without its delay.
inline constexpr size_t held_slices_max = 65'536;

class transfer_engine {
 public:
  /// Starts an engine: its region table and, if enabled, its TCP data-plane server.
  static caf::expected<std::shared_ptr<transfer_engine>> create(transfer_options options);

  /// An engine for one process that serves every node id itself and opens no socket: what the
  /// embedded one-process cluster and unit tests use.
  static caf::expected<std::shared_ptr<transfer_engine>> create_local(uint64_t key_seed = 0);

  /// As create_local, for simulated time: bytes move in-process as they would there, and every
  /// operation's result says in op_result::modeled_ns when it would end on `links` (which
  /// operations reserve, in submission order, as they are submitted). The bytes have moved when
  /// the result is read; an actor that submitted a batch acts on its end after that much of its
  /// clock (actors/common/modeled_delay.hpp).
  static caf::expected<std::shared_ptr<transfer_engine>>
  create_modeled(uint64_t key_seed, std::shared_ptr<modeled_links> links);

  ~transfer_engine();
  transfer_engine(const transfer_engine&) = delete;
  transfer_engine& operator=(const transfer_engine&) = delete;

  // -- regions ------------------------------------------------------------------------------

  /// Registers [base, base + length_bytes) as memory of `node` (one of this engine's nodes) and
  /// returns a handle to all of it; cut sub-handles with region_handle::slice. `where` says
  /// whether it is host memory or memory of a CUDA device (checked for GPU memory; see above).
  caf::expected<region_handle> register_region(uint32_t node, std::byte* base,
                                               uint64_t length_bytes,
                                               memory_location where = memory_location::cpu());

  /// Forgets a region and its grants: later operations on their handles fail with not_found.
  /// invalid_argument for a grant's handle (revoke() ends a grant).
  caf::error unregister_region(const region_handle& region);

  /// A capability for exactly the bytes of `within`, a handle (the region's own, or a slice
  /// of it) to a region this engine registered: a handle with a region id and access key of
  /// its own, that reaches those bytes and no others. Nothing is registered with a device: a
  /// grant costs one region table slot (transfer_options::region_capacity counts regions and
  /// grants together; limit_exceeded when they are all in use). Give grants, never the region's
  /// own handle, to whoever may reach only part of a region.
  ///
  /// Checked as a region is, before any byte moves: in this process (in-process and cuda
  /// paths), by the peer's engine from this engine's region table (shm; a peer there maps the
  /// memory itself, so this protects members from stale and mistaken handles, not from a
  /// hostile process on the host), and by this engine's TCP server (tcp; and each RDMA describe).
  /// RDMA: the NIC enforces the region's memory registration, not the grant. A peer that
  /// described a grant holds the region's remote key, so a revoked grant stops a peer's engine
  /// at its next describe but not a peer that keeps the key (per-grant NIC enforcement needs
  /// memory windows: not built, docs/security.md).
  caf::expected<region_handle> grant(const region_handle& within);

  /// Ends a grant: later operations on its handle fail with not_found on every path that checks
  /// the table; this process's copies in flight finish first, as for unregister_region.
  /// invalid_argument for a whole region's handle.
  caf::error revoke(const region_handle& grant);

  /// Live grants of this engine (regions' grants that are not yet revoked).
  uint32_t grant_count() const;

  /// Consults `hook` before every slice of every path (in-process, shared memory, TCP, RDMA,
  /// CUDA); empty: none. A `corrupt` changes the destination's window (8 bytes at the slice's
  /// middle) and never the source: the in-process, shared-memory and CUDA paths change the bytes
  /// once copied, a TCP or RDMA read once landed, and a TCP or RDMA write sends a changed copy
  /// of the window in place of the source's (so a checksummed TCP write fails the receiver's
  /// check). The RDMA and CUDA paths have not run on hardware.
  ///
  /// A `delay` (at most slice_delay_max) is carried out as `delays` says, and always as
  /// `modeled` on an engine with modeled links (create_modeled), whose time is its actors'
  /// clock:
  ///  - held: the slice waits in the engine's delay line (its watchdog thread) and then starts
  ///    on its path, once: the hook is not asked again for that attempt. Its batch's deadline and
  ///    cancel() still end it (a held slice of an expired or cancelled batch is let go at once
  ///    and ends so). Past held_slices_max waiting, a slice starts without its delay.
  ///  - modeled: for an engine whose callers act on op_result::modeled_ns by a virtual clock
  ///    (create_local under a simulation: actors/common/modeled_delay.hpp). The bytes move at
  ///    once, and the slice's operation ends its longest slice delay later than it would have
  ///    (timed out if that is past its batch's deadline, as on modeled links). A wait() does not
  ///    wait for it.
  /// For fault injection only: set it while no batch is in flight; it runs on the thread that
  /// starts a slice.
  void set_fault_hook(slice_fault_hook hook, fault_delays delays = fault_delays::held);

  // -- peers --------------------------------------------------------------------------------

  /// What other processes need to reach this engine's regions.
  peer_info self_info() const;

  /// Learns how to reach the nodes of another process (replacing what was known of them).
  caf::error add_peer(const peer_info& peer);

  /// Forgets a process's nodes; their operations fail with not_found from then on.
  void remove_peer(uint32_t node);

  /// The paths to `node`, most preferred first ("cuda", "local", "shm", "rdma", "tcp"); empty: no
  /// route. "cuda" only ever carries operations on GPU memory.
  std::vector<std::string> paths(uint32_t node) const;

  /// None where this engine has an RDMA path; else why not (unavailable, with the reason).
  caf::error rdma_status() const;

  /// None where this engine has a cuda path (GPU memory); else why not (unavailable).
  caf::error cuda_status() const;

  // -- operations ---------------------------------------------------------------------------

  /// Starts a batch. Errors only for a malformed batch as a whole (too many operations); each
  /// operation's own problems show in its result.
  caf::expected<batch_id> submit(std::span<const transfer_op> ops, clock_type::time_point deadline);

  /// As submit, and calls `done` once with every result when the batch ends (from whichever
  /// thread ends it: a connection's, a device poller's, this batch's submitter's or, for a batch
  /// cancelled, timed out or cut off while queued, the submitter of another batch to the same
  /// peer). The batch is forgotten afterwards: do not wait on or poll it. `done` must not block,
  /// nor unregister a region that slices of other batches may still be using (that waits for
  /// them, on the thread that would end them), nor remove peers or destroy the engine (that
  /// joins the thread it runs on).
  caf::error submit(std::span<const transfer_op> ops, clock_type::time_point deadline,
                    batch_callback done);

  /// The batch's results so far (pending where still running); not_found for unknown batches.
  caf::expected<std::vector<op_result>> poll(batch_id id) const;

  /// Blocks until every operation of the batch ended, returns the results and forgets it.
  caf::expected<std::vector<op_result>> wait(batch_id id);

  /// Operations not started yet end as cancelled; slices in flight finish first.
  void cancel(batch_id id);

  // -- one-operation conveniences (submit + wait) ------------------------------------------

  caf::error read(const region_handle& src, uint64_t offset, std::span<std::byte> dst,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));
  caf::error write(const region_handle& dst, uint64_t offset, std::span<const std::byte> src,
                   std::chrono::milliseconds timeout = std::chrono::seconds(30));
  /// Copies all of `src` into the start of `dst`; `src` must be this engine's own memory.
  caf::error copy(const region_handle& src, const region_handle& dst,
                  std::chrono::milliseconds timeout = std::chrono::seconds(30));

  // -- metrics ------------------------------------------------------------------------------

  /// Counters per path (backend, remote node).
  std::vector<path_metrics> metrics() const;

  struct impl;

 private:
  explicit transfer_engine(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

} // namespace crescent::transport
