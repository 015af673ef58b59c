// The OpenAI-compatible request and response shapes of `crescent serve` (docs/serve.md): pure
// functions from a body to a request, and from results to JSON, tested without a server.
//
// Text is bytes: the reference model's vocabulary maps token t to byte t, so a prompt's bytes
// are its tokens and a completion's tokens are its bytes. A prompt byte at or above the model's
// vocabulary is refused. Output bytes that do not form UTF-8 become U+FFFD (JSON carries only
// UTF-8); utf8_decoder keeps a character's bytes together across streamed chunks.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace crescent::serve {

enum class api { completions, chat };

/// An answer that is not a completion: its HTTP status and OpenAI's error object.
struct http_error {
  int status = 400;
  std::string type = "invalid_request_error";
  std::string message;
  std::string param; // the body field at fault (empty: none)
  std::string code;  // OpenAI's machine-readable code (empty: none)
};

struct request_limits {
  std::string model;                  // the one model served; `model` must name it
  uint32_t vocab = 256;               // a prompt token must be below it
  uint32_t context_tokens_max = 8192; // prompt + max_tokens at most
  uint32_t max_tokens_default = 16;   // when the body has no max_tokens (OpenAI's default)
  uint32_t json_depth_max = 32;       // nesting of the body (arrays and objects)
  uint32_t chat_messages_max = 1024;
};

struct completion_request {
  api kind = api::completions;
  std::vector<uint32_t> prompt;
  uint32_t max_tokens = 16;
  bool stream = false;
  bool include_usage = false; // stream_options.include_usage: a last chunk with the usage
};

/// The body of POST /v1/completions or /v1/chat/completions, checked against `limits`. Sampling
/// is greedy only: temperature must be absent or 0, top_p absent or 1, n absent or 1; fields
/// Crescent does not implement (stop, logprobs, tools, ...) are refused by name rather than
/// ignored, so that a client never gets an answer that silently differs from what it asked.
std::variant<completion_request, http_error> parse_request(api kind, std::string_view body,
                                                           const request_limits& limits);

/// The prompt a chat becomes: "role: content\n" per message, then "assistant: " (docs/serve.md).
std::string chat_prompt(const std::vector<std::pair<std::string, std::string>>& messages);

struct usage {
  uint32_t prompt_tokens = 0;
  uint32_t completion_tokens = 0;
  uint32_t cached_tokens = 0; // prompt tokens whose KV was reused rather than computed
};

/// Who answers: the id ("cmpl-N" or "chatcmpl-N"), its creation time and the model.
struct answer_head {
  api kind = api::completions;
  std::string id;
  int64_t created_s = 0;
  std::string model;
};

/// A whole (non-streamed) answer. finish_reason: "length" (max_tokens reached) or "stop".
std::string completion_json(const answer_head& head, const std::string& text,
                            const std::string& finish_reason, const usage& u);

/// One server-sent event of a streamed answer ("data: {...}\n\n"). The first chunk of a chat
/// carries the assistant role; the last has a finish_reason.
std::string chunk_event(const answer_head& head, const std::string& text, bool first,
                        const std::optional<std::string>& finish_reason);
/// The usage chunk of stream_options.include_usage (no choices).
std::string usage_event(const answer_head& head, const usage& u);
inline constexpr std::string_view done_event = "data: [DONE]\n\n";

/// The request header that asks a stream for its server-side times (`crescent bench serve`).
inline constexpr const char* timing_header = "X-Crescent-Timing";
/// A completed stream's times inside the server, as steady-clock readings in nanoseconds
/// (CLOCK_MONOTONIC on Linux: one clock for every process of the machine, so a client on the same
/// machine can set them beside its own).
struct server_timing {
  int64_t handler_ns = 0;     // the HTTP handler started
  int64_t arrival_ns = 0;     // the request actor's arrival (where an in-process replay starts)
  int64_t first_token_ns = 0; // the request actor's first token
  int64_t first_event_ns = 0; // the first server-sent event written; -1: not known
};
/// The server-sent comment (": ...", which clients skip) that carries them. Sent before
/// `[DONE]`, only when the request carried timing_header.
std::string timing_comment(const server_timing& t);
/// timing_comment's values read back from its line (without the blank line after it); nothing
/// when the line is not one.
std::optional<server_timing> parse_timing_comment(std::string_view line);

/// {"error": {...}} for an http_error.
std::string error_json(const http_error& e);
/// A streamed answer that fails after its first chunk: an error event (the status is sent).
std::string error_event(const http_error& e);

/// GET /v1/models.
std::string models_json(const std::string& model, int64_t created_s);

/// Tokens to UTF-8 text, one byte per token, across calls: a character split between two calls
/// comes out whole with the second; bytes that cannot form UTF-8 (or tokens above 255) become
/// U+FFFD.
class utf8_decoder {
 public:
  std::string push(std::span<const uint32_t> tokens);
  /// What is left (an unfinished character) as U+FFFD; the decoder is empty afterwards.
  std::string flush();

 private:
  std::string pending_; // the bytes of one unfinished character
  uint32_t need_ = 0;   // the continuation bytes it still needs
};

/// Decodes all of `tokens` at once.
std::string tokens_to_text(std::span<const uint32_t> tokens);

} // namespace crescent::serve
