@0xb6701f505966cdac;
# Membership of clusters that span processes: the cluster's main process (conductor, store
# master, prefill workers) joins each node hosted by a `crescent node` process, and learns its
# actors and how to reach its memory.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");
using Common = import "common.capnp";

# main process -> node agent of a hosted node. Both sides read the same cluster file; the node
# refuses a join whose terms differ from its own (another model, another node, other instances),
# since KV bytes of one model are meaningless to another.
struct NodeJoin {
  node @0 :UInt32;                 # the node the main process expects there
  modelFingerprint @1 :UInt64;     # gpu::model_config::fingerprint()
  pageBytes @2 :UInt64;            # bytes of one KV page (one block of every layer)
  firstDecodeInstance @3 :UInt32;  # cluster-wide index of the node's first decode instance
  decodeInstances @4 :UInt32;      # at most 16
  peer @5 :Common.TransportPeer;   # how to reach the main process's memory
}

# node agent -> main process: the join is accepted. The actors themselves travel next to this
# message as actor handles.
struct NodeWelcome {
  node @0 :UInt32;
  decodeInstances @1 :UInt32;
  peer @2 :Common.TransportPeer;   # how to reach this node's memory (its pool, its decode KV)
}
