@0xbf34bdd49bebf531;
# Protocols of the store master (block metadata) and the block owners (block memory).

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");
using Common = import "common.capnp";

# -- store master -------------------------------------------------------------------------

enum ReplicaPlacement {
  localFirst @0;   # the writer's node first, then the most free
  mostFree @1;     # the nodes with the most free DRAM
  random @2;       # any live nodes
}

# Step 1 of a put: reserve space for `replicaCount` replicas of each new block, on distinct nodes.
struct PutStart {
  node @0 :UInt32;                  # the writer's node, for local-first placement
  replicaCount @1 :UInt32;          # 1 to 8
  placement @2 :ReplicaPlacement;
  keys @3 :List(Common.BlockKey);
  sizes @4 :List(UInt64);           # bytes of each block
  chainPositions @5 :List(UInt32);  # each block's index in its prompt's chain (eviction hint)
  replicate @6 :Bool;   # the blocks exist: one more replica of each on `node`, for a copy the
                        # writer read from elsewhere (how hot blocks spread); commit with
                        # PutCommit.replicas
}

struct PutSlot {
  key @0 :Common.BlockKey;
  union {
    replicas @1 :List(Common.RegionHandle);  # write every one, then commit
    exists @2 :Void;                         # already pending or complete: skip
    noSpace @3 :Void;                        # not enough live nodes with room: skip
    onlyOnSsd @4 :Void;  # complete, but in no live node's DRAM: skip it here; a fresh DRAM copy
                         # is welcome through a `replicate` put on the writer's node
  }
}

struct PutStartReply {
  slots @0 :List(PutSlot);
}

# Step 3 of a put: every replica is written; record the checksums and make the blocks readable.
# Answered only once the records are synced.
struct PutCommit {
  keys @0 :List(Common.BlockKey);
  checksums @1 :List(UInt64);   # xxh3-64 of each block's bytes
  replicas @2 :Bool;            # commit replicas a `replicate` put granted: their checksums must
                                # be the blocks' own; recorded unsynced, as replica changes are
}

# Abandon a started put: the space is freed and the keys forgotten.
struct PutRevoke {
  keys @0 :List(Common.BlockKey);
}

# Where blocks are, with a read lease: a leased block is neither evicted nor its space reused
# before leaseUntilNs.
struct Get {
  keys @0 :List(Common.BlockKey);
  prefixOnly @1 :Bool;   # stop at the first block that is not available
  # The reader's node, and whether it reads other nodes' copies (a pull). A block only on SSD is
  # read back on the reader's node where that has a copy, on another node only for a reader that
  # pulls (else the drive's time and DRAM would go to a copy it does not read). No reader (the
  # default, or a node outside the pool): the first live copy, wherever it is.
  reader @2 :UInt32 = 0xffffffff;
  pull @3 :Bool = true;
}

struct BlockLocation {
  key @0 :Common.BlockKey;
  sizeBytes @1 :UInt64;
  checksum @2 :UInt64;
  replicas @3 :List(Common.RegionHandle);  # in DRAM; empty: not available
  leaseUntilNs @4 :Int64;                  # on the store master's clock
  fromSsd @5 :Bool;                        # read back from an SSD tier for this get
}

struct GetReply {
  blocks @0 :List(BlockLocation);   # one per key (prefixOnly: the available prefix)
}

struct Exists {
  keys @0 :List(Common.BlockKey);
}

struct ExistsReply {
  present @0 :List(Bool);
}

struct Remove {
  keys @0 :List(Common.BlockKey);
}

# Keep blocks from eviction: hard until unpinned, soft for a time.
struct Pin {
  keys @0 :List(Common.BlockKey);
  hard @1 :Bool;
  ttlMs @2 :UInt32;   # soft pins
}

struct Unpin {
  keys @0 :List(Common.BlockKey);
}

# A reader found a replica whose bytes do not match the checksum: drop that replica (once its
# owner, asked with VerifyBlock, does not find its own copy intact: the bytes may have changed
# on their way to the reader, not at rest).
struct ReportCorrupt {
  key @0 :Common.BlockKey;
  node @1 :UInt32;
}

# store master -> owner: does your DRAM copy of this block still match its checksum?
struct VerifyBlock {
  key @0 :Common.BlockKey;
  checksum @1 :UInt64;
}

struct VerifyReply {
  intact @0 :Bool; # held in DRAM, and its bytes match
}

struct StoreStats {
  completeBlocks @0 :UInt64;
  pendingBlocks @1 :UInt64;
  badMessages @2 :UInt64;
  corruptReports @3 :UInt64;
  reclaimedPuts @4 :UInt64;
  lostBlocks @5 :UInt64;     # left without any replica
  liveNodes @6 :UInt32;
  evictionsApproved @7 :UInt64;
  evictionsRefused @8 :UInt64;
  ssdWriteErrors @9 :UInt64;  # summed over live nodes, as of their last heartbeats
  ssdReadErrors @10 :UInt64;
  commitWrites @11 :UInt64;   # synced writes for put_commits: concurrent commits share one
  replicasAdded @12 :UInt64;  # replicas of existing blocks committed (copies of pulled blocks)
  droppedOnLoad @13 :UInt64;  # blocks and replicas dropped reading the metadata back (bad ones)
  leasedBlocks @14 :UInt64;   # blocks a reader may be reading now: their read lease has not ended
  lostReplicatedBlocks @15 :UInt64; # of lostBlocks: acknowledged on 2+ nodes, never thinned on purpose
  nodesLost @16 :UInt32;      # distinct nodes that left the pool at least once
  intactOnVerify @17 :UInt64; # replicas a reader reported corrupt, intact at their owner: kept
  unverifiedReports @18 :UInt64; # reported corrupt, the owner gave no answer: kept
}

# -- block owners -------------------------------------------------------------------------

# store master -> owner: space for blocks.
struct Allocate {
  keys @0 :List(Common.BlockKey);
  sizes @1 :List(UInt64);
  chainPositions @2 :List(UInt32);
}

struct AllocateReply {
  handles @0 :List(Common.RegionHandle);   # one per key; regionId 0: no room
}

# store master -> owner: forget blocks (DRAM and SSD).
struct FreeBlocks {
  keys @0 :List(Common.BlockKey);
}

# store master -> owner: copy SSD-only blocks back into DRAM.
struct Promote {
  keys @0 :List(Common.BlockKey);
}

struct PromoteReply {
  handles @0 :List(Common.RegionHandle);   # one per key; regionId 0: failed
  lost @1 :List(Bool);   # per key: the owner has no readable copy (its SSD copy failed to read,
                         # or it holds none): drop the replica. Empty: none lost.
}

# store master -> owner: these blocks were used (a get returned them, or a put produced them
# again), in the order of use, so that the owner's eviction order follows reads, which are
# one-sided and never reach it. No reply; sent only by the master.
struct Touch {
  keys @0 :List(Common.BlockKey);   # 1 to 4096; blocks the owner no longer holds are ignored
}

# owner -> store master, every heartbeat interval.
struct OwnerHeartbeat {
  node @0 :UInt32;
  dramCapacityBytes @1 :UInt64;
  dramUsedBytes @2 :UInt64;
  ssdCapacityBytes @3 :UInt64;
  ssdUsedBytes @4 :UInt64;
  ssdWriteErrors @5 :UInt64;   # since the owner started
  ssdReadErrors @6 :UInt64;
}

# owner -> store master: may these DRAM copies go? `offloaded`: a copy is on SSD now.
struct EvictRequest {
  node @0 :UInt32;
  keys @1 :List(Common.BlockKey);
  offloaded @2 :List(Bool);
}

struct EvictReply {
  approved @0 :List(Bool);   # refused: leased, pinned or pending; keep the DRAM copy
}

struct OwnerBlock {
  key @0 :Common.BlockKey;
  sizeBytes @1 :UInt64;
  inDram @2 :Bool;
  dram @3 :Common.RegionHandle;
  onSsd @4 :Bool;
}

# owner -> store master, when it starts and when the master asks: what the owner holds, and how
# other processes reach its memory. The sender of the report is the node's owner from then on.
struct OwnerReport {
  node @0 :UInt32;
  blocks @1 :List(OwnerBlock);
  hasPeer @2 :Bool;                 # false in one-process clusters: every region is local
  peer @3 :Common.TransportPeer;
  dramCapacityBytes @4 :UInt64;     # so placement knows the node's room from its first report
  dramUsedBytes @5 :UInt64;
  wireVersion @6 :UInt32;           # messages/wire_version.hpp: an owner of another is refused
}

# store master -> clients: how to reach every live owner's memory.
struct PoolPeers {
  peers @0 :List(Common.TransportPeer);
}

struct OwnerReportReply {
  drop @0 :List(Common.BlockKey);   # blocks the master does not know: free them
}

struct OwnerStats {
  node @0 :UInt32;
  dramCapacityBytes @1 :UInt64;
  dramUsedBytes @2 :UInt64;
  ssdCapacityBytes @3 :UInt64;
  ssdUsedBytes @4 :UInt64;
  blocks @5 :UInt64;
  evictions @6 :UInt64;
  offloads @7 :UInt64;
  promotions @8 :UInt64;
  badMessages @9 :UInt64;
  ssdWriteErrors @10 :UInt64;   # offloads that failed (disk full, I/O error)
  ssdReadErrors @11 :UInt64;    # promotions that failed (I/O error, bad checksum)
  lastSsdError @12 :Text;       # the latest of those, for people
  evictionRefusals @13 :UInt64; # victims the master refused (they step aside for a while)
}

# -- pool metadata, persisted by the store master -----------------------------------------

struct Replica {
  node @0 :UInt32;
  inDram @1 :Bool;
  dram @2 :Common.RegionHandle;   # where, when inDram
  onSsd @3 :Bool;
}

# One complete block as the store master persists it in RocksDB.
struct ObjectRecord {
  key @0 :Common.BlockKey;
  sizeBytes @1 :UInt64;
  checksum @2 :UInt64;
  replicas @3 :List(Replica);
  hardPin @4 :Bool;
}
