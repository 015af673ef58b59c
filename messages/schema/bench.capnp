@0xa95d78da4d1f83b6;
# Protocol of the transfer peer, the helper process of `crescent bench transfer` and of the
# multi-process transport tests.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("crescent::wire");

struct ByteRange {
  offset @0 :UInt64;
  length @1 :UInt64;
}

struct Digest {
  xxh3 @0 :UInt64;
}
