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

# The reply to a message whose only answer is "done".
struct Ack {
  requestId @0 :UInt64;
}
