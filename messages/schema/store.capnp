@0xbf34bdd49bebf531;
# Protocols of the store master (block metadata) and the block owners (block memory).

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");
using Common = import "common.capnp";

# -- store master -------------------------------------------------------------------------

# Step 1 of a put: reserve space for blocks that the pool does not have yet.
struct PutStart {
  node @0 :UInt32;              # preferred node (local-first placement)
  blockBytes @1 :UInt64;
  keys @2 :List(UInt64);
}

struct PutSlot {
  key @0 :UInt64;
  union {
    handle @1 :Common.RegionHandle;  # write here, then commit
    exists @2 :Void;                 # already pending or complete: skip
    noSpace @3 :Void;                # the pool is full: skip
  }
}

struct PutStartReply {
  slots @0 :List(PutSlot);
}

# Step 3 of a put: every byte is written; record the checksums and make the blocks readable.
struct PutCommit {
  keys @0 :List(UInt64);
  checksums @1 :List(UInt64);   # xxh3-64 of each block's bytes
}

# Abandon a started put: the space is freed and the keys forgotten.
struct PutRevoke {
  keys @0 :List(UInt64);
}

# Longest prefix of `keys` whose blocks are complete.
struct GetPrefix {
  keys @0 :List(UInt64);
}

struct BlockLocation {
  key @0 :UInt64;
  handle @1 :Common.RegionHandle;
  checksum @2 :UInt64;
}

struct GetPrefixReply {
  blocks @0 :List(BlockLocation);
}

# A reader found a block whose bytes do not match its checksum: drop it from the pool.
struct ReportCorrupt {
  key @0 :UInt64;
}

struct StoreStats {
  completeBlocks @0 :UInt64;
  pendingBlocks @1 :UInt64;
  badMessages @2 :UInt64;
  corruptReports @3 :UInt64;
}

enum BlockState {
  pending @0;
  complete @1;
  removed @2;
}

# One block's metadata as the store master persists it in RocksDB.
struct BlockRecord {
  key @0 :UInt64;
  node @1 :UInt32;
  handle @2 :Common.RegionHandle;
  sizeBytes @3 :UInt64;
  checksum @4 :UInt64;
  state @5 :BlockState;
}

# -- block owner --------------------------------------------------------------------------

struct Allocate {
  count @0 :UInt32;
  blockBytes @1 :UInt64;
}

struct AllocateReply {
  handles @0 :List(Common.RegionHandle);   # possibly fewer than asked for: the pool is full
}

struct FreeBlocks {
  handles @0 :List(Common.RegionHandle);
}

struct OwnerStats {
  node @0 :UInt32;
  capacityBlocks @1 :UInt32;
  usedBlocks @2 :UInt32;
  badMessages @3 :UInt64;
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
  key @0 :UInt64;
  sizeBytes @1 :UInt64;
  checksum @2 :UInt64;
  replicas @3 :List(Replica);
  hardPin @4 :Bool;
}
