// The connection's receiving side: responses matched to the slices in flight, read payloads
// straight into the initiator's buffers.
#include "messages/errors.hpp"
#include "messages/xxh3.hpp"
#include "transport/tcp/stream_reader.hpp"
#include "transport/tcp/tcp_connection.hpp"
#include "transport/tcp/tcp_protocol.hpp"
#include "transport/trace_points.hpp"

#include <sys/socket.h>

#include <string>

namespace crescent::transport::tcp {

void connection::receive_loop() {
  stream_reader in{fd_}; // write acknowledgements arrive many to a segment
  for (;;) {
    response_header res;
    auto err = in.read(&res, sizeof(res));
    CRESCENT_TRACE(response_read, res.request_id);
    if (!err && res.magic != response_magic)
      err = make_error(errc::io_error, "malformed response");
    if (err) {
      shutdown(fd_, SHUT_RDWR);
      fail_all(make_error(errc::io_error, "connection to node " + std::to_string(node_) + " (" +
                                              host_ + ":" + std::to_string(port_) +
                                              ") lost: " + describe(err)));
      return;
    }
    slice_record* s = nullptr;
    bool reopened = false;
    {
      std::lock_guard guard{mutex_};
      auto i = in_flight_.find(res.request_id);
      if (i != in_flight_.end()) {
        s = i->second;
        in_flight_.erase(i);
      }
      receiving_ = s;
      reopened = window_full_ && in_flight_.size() <= window_resume_slices;
      if (reopened)
        window_full_ = false;
    }
    // The sender waits on the window only once it was full, and then for half of it: waking it
    // at every response costs a context switch per slice.
    if (reopened)
      changed_.notify_all();
    caf::error verdict;
    if (s == nullptr ||
        (res.status == 0 && res.length != (s->kind == op_kind::read ? s->length : 0)))
      verdict = make_error(errc::io_error, "response does not match any request");
    else if (res.status != 0) {
      std::string message(res.message_bytes, '\0');
      verdict = in.read(message.data(), message.size());
      const auto refusal = refusal_of(res.status);
      if (!verdict && refusal)
        verdict = make_error(*refusal, "node " + std::to_string(node_) + " refused: " + message);
      else if (!verdict) // rare: a peer that does not speak the protocol
        verdict =
            make_error(errc::io_error, "node " + std::to_string(node_) + " answered with status " +
                                           std::to_string(res.status) + ", not a refusal");
    } else if (res.length > 0) {
      verdict = in.read(s->local, res.length);
      if (!verdict && s->fault == slice_fault::corrupt) // injected
        corrupt_bytes(s->local, res.length);
      if (!verdict && s->checksum && xxh3_64(s->local, res.length) != res.checksum)
        verdict = make_error(errc::checksum_mismatch, "read payload does not match its checksum");
    }
    {
      // From here on `s` may complete, and its record go, at any moment.
      std::lock_guard guard{mutex_};
      receiving_ = nullptr;
    }
    if (s == nullptr || (verdict && is(verdict, errc::io_error))) {
      // The stream is out of step or gone: nothing after this can be trusted. The connection
      // is marked broken before any slice is retried, so no retry lands on it again.
      shutdown(fd_, SHUT_RDWR);
      fail_all(make_error(errc::io_error, "connection to node " + std::to_string(node_) +
                                              " broke: " + describe(verdict)),
               s);
      return;
    }
    complete_slice(*s, std::move(verdict));
  }
}

} // namespace crescent::transport::tcp
