// Timeouts of requests between actors. Every request has one: a request to an actor that has
// died, or lives in a process that has, must end with an error instead of waiting forever.
#pragma once

#include <chrono>

namespace crescent {

/// Control messages (schedule, reserve, allocate, commit, ...): generous, since a busy worker
/// may be inside a compute step when the message arrives.
inline constexpr auto control_timeout = std::chrono::seconds(30);

/// A request's asks of its workers (a decode reservation, a prefill or coupled job) and a
/// prefill worker's kv_ready that go unanswered this long are sent again (ask_again.hpp), up to
/// ask_sends_max in all, which together last control_timeout: a worker answers a copy as it
/// answered the first (the same pages; a job taken already counts as accepted; KV already in
/// counts as done), so an ask or an answer lost on the way costs this long instead of the
/// attempt. Workers answer these at once (a job is answered as it is queued).
inline constexpr auto ask_resend_timeout = std::chrono::seconds(5);
inline constexpr unsigned ask_sends_max = 6;
static_assert(ask_resend_timeout * ask_sends_max == control_timeout);

/// The KV of one prompt on its way to the decode instance (up to the context limit, through
/// the transfer engine): a batch that has not ended by then fails the request.
inline constexpr auto kv_handoff_timeout = std::chrono::seconds(30);

/// A request that has its first token and hears no further token from its decode instance for
/// this long fails ("sent no token for 30 s") instead of waiting for its deadline: a token batch
/// or a kv_ready lost on the way would otherwise hold it (and its decode memory) that long.
/// Decode steps take milliseconds; an instance rotates through more sequences than a batch takes.
inline constexpr auto decode_quiet_timeout = std::chrono::seconds(30);

/// A request on a coupled instance that hears nothing from it for this long (from the job's
/// acceptance, or its last token) asks the instance whether it still holds the job and how many
/// tokens it sent (JobProbe). Quiet alone is no failure there: a coupled instance's queue and
/// its whole-prompt prefills pause its decodes. A job no longer held, tokens sent that never
/// came, or no answer (within control_timeout) fail the attempt; else the watch starts again.
inline constexpr auto coupled_quiet_timeout = std::chrono::seconds(30);

/// A prefill group's head whose own part of a job has ended waits this long for the other stages
/// to say they are done (StageDone) before it fails the job: a lost StageDone would otherwise
/// hold the group, and every job queued behind it, until the requests' deadlines. A stage ends
/// a few chunks' compute after the head at most. A head that failed a job asks its stages that
/// have not answered its StageAbort again this often (the abort or its answer lost), holding the
/// job's pages, which they may still write, until each has.
inline constexpr auto stage_quiet_timeout = std::chrono::seconds(30);

/// A stage of a prefill group that hears nothing of its job (no chunk from the stage before it)
/// for this long fails it, and tells its head: the head may have failed the job without reaching
/// it (its StageJob's answer lost, the StageAbort too), or the job is a late copy the head no
/// longer runs, and the stage would otherwise refuse every later job as busy. Twice the head's
/// watch: the head may wait for its prefix loads (pool_io_timeout) before the first chunk.
inline constexpr auto stage_job_quiet_timeout = std::chrono::seconds(60);

/// A batch of reads of cached blocks, or of writes of new ones, between a prefill worker and the
/// pool: one that has not ended by then counts its blocks as misses (or leaves them unstored).
inline constexpr auto pool_io_timeout = std::chrono::seconds(30);

} // namespace crescent
