@0xb6701f505966cdac;
# Membership of clusters that span processes: the cluster's main process (conductor, store
# master) joins each node hosted by a `crescent node` process and learns its actors and how to
# reach its memory; once all have joined, it tells each what the node's prefill workers need of
# the rest of the cluster.

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
  firstPrefillInstance @6 :UInt32; # cluster-wide index of the node's first prefill instance
  prefillInstances @7 :UInt32;     # at most 16
  wireVersion @8 :UInt32;          # messages/wire_version.hpp; a peer of another is refused
}

# node agent -> main process: the join is accepted. The actors themselves travel next to this
# message as actor handles.
struct NodeWelcome {
  node @0 :UInt32;
  decodeInstances @1 :UInt32;
  peer @2 :Common.TransportPeer;   # how to reach this node's memory (its pool, its decode KV)
  prefillInstances @3 :UInt32;
  wireVersion @4 :UInt32;          # messages/wire_version.hpp; a peer of another is refused
}

# main process -> node agent of a joined node, once every node has joined and before any
# request: how to reach every process's memory. The conductor, the store master and every decode
# worker travel next to it as actor handles.
struct ClusterDirectory {
  peers @0 :List(Common.TransportPeer); # every process of the cluster, at most 64
  decodeInstances @1 :UInt32;           # of the whole cluster
}
