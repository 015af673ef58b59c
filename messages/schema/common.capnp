@0xec4322bbce873f0f;
# Types shared by every protocol. Field comments state units and limits; the receiving actor
# checks the limits and replies with an error instead of acting on a value outside them.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");

# Names a byte range of memory registered with the transfer engine. Whoever holds a handle may
# read or write exactly that range through the engine, and nothing else: the engine refuses an
# operation whose access key does not match or that falls outside [offset, offset + length).
struct RegionHandle {
  node @0 :UInt32;       # node that owns the memory
  regionId @1 :UInt64;   # registry id, unique per node for the life of the process
  offset @2 :UInt64;     # bytes from the start of the region
  length @3 :UInt64;     # bytes
  accessKey @4 :UInt64;  # random per region; a copy of the handle is a capability
}

# The key of a KV block: 128 bits of a chained SHA-256 over the model's root and the prompt's
# tokens (storage/block_key.hpp). Equal keys: equal prefixes, up to a SHA-256 collision.
struct BlockKey {
  hi @0 :UInt64;
  lo @1 :UInt64;
}

# The reply to a message whose only answer is "done".
struct Ack {
  requestId @0 :UInt64;
}

# How to reach the regions of another process's transfer engine. Processes exchange these
# through actor messages; see transport/peer_wire.hpp.
struct TransportPeer {
  nodes @0 :List(UInt32);   # nodes whose regions that process serves
  hostId @1 :Text;          # equal host ids: the shared-memory path may be used
  pid @2 :Int32;
  tcpHost @3 :Text;         # its data-plane server; empty: none
  tcpPort @4 :UInt16;
  tableFd @5 :Int32;        # its region table, for peers on the same host; -1: none
  tableBytes @6 :UInt64;
  rdmaPorts @7 :List(RdmaPort); # its RDMA devices, one active port each; empty: no RDMA path

  # One RDMA port of that process: enough for an initiator to choose a device pair that can
  # reach each other. Queue pairs themselves are set up later over its data-plane server.
  struct RdmaPort {
    device @0 :Text;        # e.g. mlx5_0; at most 63 bytes
    port @1 :UInt8;         # 1-based port number on that device
    linkLayer @2 :UInt8;    # 1: InfiniBand, 2: Ethernet (RoCE)
    lid @3 :UInt16;         # InfiniBand local id; 0 on Ethernet
    gid @4 :Data;           # 16 bytes: the GID it uses (InfiniBand: subnet prefix + GUID)
  }
}

# How a prefill sends a prompt's KV to its decode instance. config: as the cluster file says
# (prefill.stream_min_tokens); after: all of it once prefill ends; stream: layer by layer while
# it runs. A prefill group's jobs always stream (each stage sends its own layers).
enum KvSend {
  config @0;
  after @1;
  stream @2;
}
