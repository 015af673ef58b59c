// The message stream of a simulation as a file (`crescent replay --sim --messages FILE`): one
// line per delivered message, tab-separated, after a header that names the columns:
//
//   # crescent messages 1: time_ns sender receiver type bytes
//   1000000  conductor  request/81  reply/ScheduleReply  96
//
// time_ns: virtual time since the start. sender and receiver: the actor's role and index
// (conductor, store_master, block_owner/3, node_agent/3, prefill/2, decode/5; a request actor:
// request/ID, its request's id), or its CAF name and id (replay_driver#40); "-" for an anonymous
// sender (a timer, the end of a transfer). type: the operation (the message's atom), "reply" for an
// answer, "down" or "exit" for CAF's own, then "/" and the Cap'n Proto struct it carries, if any.
// bytes: that struct's size (0 without one). The report's stream hash covers the same records.
#pragma once

#include "apps/sim/sim_system.hpp"

#include <caf/expected.hpp>

#include <cstdio>
#include <memory>
#include <string>

namespace crescent::sim {

class message_log {
 public:
  static caf::expected<std::unique_ptr<message_log>> open(const std::string& path);
  ~message_log();
  message_log(const message_log&) = delete;
  message_log& operator=(const message_log&) = delete;

  void write(const delivered_message& m, const sim_system& sim);

  /// Flushes and closes; an error if any write failed (a full disk, say).
  caf::error close();

 private:
  message_log(std::FILE* file, std::string path) : file_(file), path_(std::move(path)) {}
  std::FILE* file_;
  std::string path_;
  bool failed_ = false;
};

} // namespace crescent::sim
