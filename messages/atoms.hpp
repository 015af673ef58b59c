// The atoms that name operations in typed-actor interfaces. Each handler takes an atom and an
// envelope; the atom selects the operation and the envelope's schema is checked on reading.
#pragma once

#include <caf/atom.hpp>

namespace crescent {

// conductor
using schedule_atom = caf::atom_constant<caf::atom("schedule")>;
using report_atom = caf::atom_constant<caf::atom("report")>;
using heartbeat_atom = caf::atom_constant<caf::atom("heartbeat")>;
using watch_atom = caf::atom_constant<caf::atom("watch")>;
using stats_atom = caf::atom_constant<caf::atom("stats")>;
using evicted_atom = caf::atom_constant<caf::atom("evicted")>; // blocks gone (master -> conductor)
// workers
using reserve_atom = caf::atom_constant<caf::atom("reserve")>;
using release_atom = caf::atom_constant<caf::atom("release")>;
using prefill_atom = caf::atom_constant<caf::atom("prefill")>;
using kv_ready_atom = caf::atom_constant<caf::atom("kv_ready")>;
using step_atom = caf::atom_constant<caf::atom("step")>;
using handed_off_atom = caf::atom_constant<caf::atom("handed_off")>;
using loaded_atom = caf::atom_constant<caf::atom("loaded")>;
using stored_atom = caf::atom_constant<caf::atom("stored")>;
// prefill pipeline stages (CPP)
using stage_atom = caf::atom_constant<caf::atom("stage")>;
using stage_inbox_atom = caf::atom_constant<caf::atom("st_inbox")>;
using stage_chunk_atom = caf::atom_constant<caf::atom("st_chunk")>;
using stage_done_atom = caf::atom_constant<caf::atom("st_done")>;
using stage_abort_atom = caf::atom_constant<caf::atom("st_abort")>;
using stage_watch_atom = caf::atom_constant<caf::atom("st_watch")>; // a group head's stages late?
using stage_io_atom = caf::atom_constant<caf::atom("st_io")>;       // a stage's transfer ended
// request
using run_atom = caf::atom_constant<caf::atom("run")>;
using prefill_done_atom = caf::atom_constant<caf::atom("pf_done")>;
using tokens_atom = caf::atom_constant<caf::atom("tokens")>;
using failed_atom = caf::atom_constant<caf::atom("failed")>;
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;
using stream_atom = caf::atom_constant<caf::atom("stream")>; // run, each token to a listener
using cancel_atom = caf::atom_constant<caf::atom("cancel")>; // the client gave up
using quiet_atom = caf::atom_constant<caf::atom("quiet")>;   // has decode gone quiet?
using probe_atom = caf::atom_constant<caf::atom("probe")>;   // does the instance hold my job?
// store master and block owners
using put_start_atom = caf::atom_constant<caf::atom("put_start")>;
using put_commit_atom = caf::atom_constant<caf::atom("put_commit")>;
using put_revoke_atom = caf::atom_constant<caf::atom("put_revoke")>;
using get_prefix_atom = caf::atom_constant<caf::atom("get_prefix")>;
using corrupt_atom = caf::atom_constant<caf::atom("corrupt")>;
using verify_atom = caf::atom_constant<caf::atom("verify")>;
using allocate_atom = caf::atom_constant<caf::atom("allocate")>;
using free_atom = caf::atom_constant<caf::atom("free")>;
using get_atom = caf::atom_constant<caf::atom("get")>;
using exists_atom = caf::atom_constant<caf::atom("exists")>;
using remove_atom = caf::atom_constant<caf::atom("remove")>;
using pin_atom = caf::atom_constant<caf::atom("pin")>;
using unpin_atom = caf::atom_constant<caf::atom("unpin")>;
using promote_atom = caf::atom_constant<caf::atom("promote")>;
using evict_atom = caf::atom_constant<caf::atom("evict")>;
using touch_atom = caf::atom_constant<caf::atom("touch")>; // blocks used (master -> owner)
using owner_atom = caf::atom_constant<caf::atom("owner")>; // owner heartbeats and reports
using peers_atom = caf::atom_constant<caf::atom("peers")>;
using join_atom = caf::atom_constant<caf::atom("join")>;
// conductor -> store master: a node left or rejoined the membership
using membership_atom = caf::atom_constant<caf::atom("members")>;
// node agent
using start_atom = caf::atom_constant<caf::atom("start")>;
using directory_atom = caf::atom_constant<caf::atom("directory")>;
using tick_atom = caf::atom_constant<caf::atom("tick")>;

} // namespace crescent
