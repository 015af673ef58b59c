// Each actor's interface names the schema of what it takes and answers: a message of another
// schema, or an envelope of no schema, does not fit it, so sending one fails to compile. These
// checks run when the test binary compiles: a change that loosened an interface breaks the build.
#include "actors/block_owner/block_owner_actor.hpp"
#include "actors/conductor/conductor_actor.hpp"
#include "actors/coupled_worker/coupled_worker_actor.hpp"
#include "actors/decode_worker/decode_worker_actor.hpp"
#include "actors/node_agent/node_agent_actor.hpp"
#include "actors/prefill_worker/prefill_worker_actor.hpp"
#include "actors/request/request_actor.hpp"
#include "actors/store_master/store_master_actor.hpp"

#include <caf/response_type.hpp>

#include <type_traits>

namespace crescent::testing {
namespace {

template <class Handle, class... In>
constexpr bool accepts = caf::response_type<typename Handle::signatures, In...>::valid;

template <class Handle, class Out, class... In>
constexpr bool answers =
    std::is_same_v<typename caf::response_type<typename Handle::signatures, In...>::type,
                   caf::detail::type_list<Out>>;

template <class T>
using env = typed_envelope<T>;

// The right schema fits; another schema, or a bare envelope, does not.
static_assert(accepts<store_master_actor, put_start_atom, env<wire::PutStart>>);
static_assert(!accepts<store_master_actor, put_start_atom, env<wire::Get>>);
static_assert(!accepts<store_master_actor, put_start_atom, envelope>);
static_assert(
    answers<store_master_actor, env<wire::PutStartReply>, put_start_atom, env<wire::PutStart>>);
static_assert(answers<store_master_actor, env<wire::StoreStats>, stats_atom>);
static_assert(!accepts<conductor_actor, schedule_atom, env<wire::RequestSpec>>);
static_assert(
    answers<conductor_actor, env<wire::ScheduleReply>, schedule_atom, env<wire::ScheduleRequest>>);
static_assert(answers<request_actor, env<wire::RequestOutcome>, run_atom, env<wire::RequestSpec>>);
static_assert(!accepts<request_actor, tokens_atom, env<wire::PrefillDone>>);
static_assert(
    answers<decode_worker_actor, env<wire::ReserveReply>, reserve_atom, env<wire::ReserveRequest>>);
static_assert(!accepts<decode_worker_actor, release_atom, env<wire::ReserveRequest>>);
static_assert(
    answers<prefill_worker_actor, env<wire::PrefillAccepted>, prefill_atom, env<wire::PrefillJob>>);
static_assert(!accepts<prefill_worker_actor, prefill_atom, env<wire::CoupledJob>>);
static_assert(
    answers<coupled_worker_actor, env<wire::PrefillAccepted>, prefill_atom, env<wire::CoupledJob>>);
static_assert(
    answers<block_owner_actor, env<wire::AllocateReply>, allocate_atom, env<wire::Allocate>>);
static_assert(!accepts<block_owner_actor, free_atom, env<wire::Allocate>>);
static_assert(accepts<node_agent_actor, join_atom, env<wire::NodeJoin>, caf::actor, caf::actor>);
static_assert(
    !accepts<node_agent_actor, join_atom, env<wire::NodeWelcome>, caf::actor, caf::actor>);
static_assert(accepts<token_listener, tokens_atom, env<wire::TokenBatch>>);

} // namespace
} // namespace crescent::testing
