#include "apps/serve/openai.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cassert>
#include <cstdio>

namespace crescent::serve {

namespace {

using json = nlohmann::json;

http_error bad(std::string param, std::string message) {
  return http_error{400, "invalid_request_error", std::move(message), std::move(param), {}};
}

// Deeper nesting than any OpenAI body has is refused before parsing, so that no body can make
// the parser or the JSON's destructor recurse without bound.
bool deeper_than(std::string_view body, uint32_t depth_max) {
  uint32_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : body) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > depth_max)
        return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

bool present(const json& body, const char* field) {
  auto it = body.find(field);
  return it != body.end() && !it->is_null();
}

// A field that must be absent, null, or `neutral` (the value that asks for nothing).
std::optional<http_error> refuse_unless_neutral(const json& body, const char* field,
                                                const json& neutral, const char* why) {
  if (!present(body, field) || body.at(field) == neutral)
    return std::nullopt;
  return bad(field, fmt::format("{} is not supported: {}", field, why));
}

std::optional<http_error> check_sampling(const json& body) {
  if (present(body, "temperature")) {
    const auto& t = body.at("temperature");
    if (!t.is_number())
      return bad("temperature", "temperature must be a number");
    if (t.get<double>() != 0)
      return bad("temperature", "only greedy decoding is served for now: temperature must be 0 "
                                "(or absent, which means 0 here)");
  }
  static const std::pair<const char*, json> neutral[] = {{"top_p", 1},
                                                         {"n", 1},
                                                         {"best_of", 1},
                                                         {"logprobs", false},
                                                         {"echo", false},
                                                         {"presence_penalty", 0},
                                                         {"frequency_penalty", 0},
                                                         {"logit_bias", json::object()},
                                                         {"top_logprobs", 0}};
  for (const auto& [field, value] : neutral)
    if (auto e = refuse_unless_neutral(body, field, value, "decoding is greedy, one choice"))
      return e;
  for (const char* field :
       {"stop", "suffix", "tools", "tool_choice", "functions", "function_call", "response_format"})
    if (present(body, field))
      return bad(field, fmt::format("{} is not supported by this server yet", field));
  return std::nullopt;
}

std::optional<http_error> text_to_tokens(std::string_view text, const char* field,
                                         const request_limits& limits, std::vector<uint32_t>& out) {
  for (unsigned char c : text) {
    if (c >= limits.vocab)
      return bad(field, fmt::format("byte {} is outside the model's vocabulary of {} tokens (one "
                                    "token per byte)",
                                    static_cast<unsigned>(c), limits.vocab));
    out.push_back(c);
  }
  return std::nullopt;
}

std::optional<http_error> completion_prompt(const json& body, const request_limits& limits,
                                            std::vector<uint32_t>& out) {
  if (!body.contains("prompt"))
    return bad("prompt", "prompt is required");
  const auto& p = body.at("prompt");
  if (p.is_string())
    return text_to_tokens(p.get_ref<const std::string&>(), "prompt", limits, out);
  if (!p.is_array() || p.empty())
    return bad("prompt", "prompt must be a string, an array of token ids, or an array of one "
                         "string");
  if (p[0].is_string()) {
    if (p.size() != 1)
      return bad("prompt", "one prompt per request: batches of prompts are not served");
    return text_to_tokens(p[0].get_ref<const std::string&>(), "prompt", limits, out);
  }
  for (const auto& t : p) {
    if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= limits.vocab)
      return bad("prompt", fmt::format("a token id must be an integer in [0, {})", limits.vocab));
    out.push_back(t.get<uint32_t>());
  }
  return std::nullopt;
}

std::optional<http_error> message_content(const json& m, size_t i, std::string& out) {
  const auto field = fmt::format("messages[{}].content", i);
  if (!m.contains("content") || m.at("content").is_null())
    return bad(field, field + " is required");
  const auto& c = m.at("content");
  if (c.is_string()) {
    out = c.get<std::string>();
    return std::nullopt;
  }
  if (!c.is_array())
    return bad(field, field + " must be a string or an array of text parts");
  for (const auto& part : c) {
    if (!part.is_object() || part.value("type", "") != "text" || !part.contains("text") ||
        !part.at("text").is_string())
      return bad(field, field + ": only text parts ({\"type\": \"text\", \"text\": ...}) are "
                                "served");
    out += part.at("text").get<std::string>();
  }
  return std::nullopt;
}

std::optional<http_error> chat_messages(const json& body, const request_limits& limits,
                                        std::vector<uint32_t>& out) {
  if (!body.contains("messages"))
    return bad("messages", "messages is required");
  const auto& ms = body.at("messages");
  if (!ms.is_array() || ms.empty())
    return bad("messages", "messages must be a non-empty array");
  if (ms.size() > limits.chat_messages_max)
    return bad("messages", fmt::format("at most {} messages", limits.chat_messages_max));
  std::vector<std::pair<std::string, std::string>> turns;
  for (size_t i = 0; i < ms.size(); ++i) {
    const auto& m = ms[i];
    const auto role_field = fmt::format("messages[{}].role", i);
    if (!m.is_object() || !m.contains("role") || !m.at("role").is_string())
      return bad(role_field, role_field + " must be a string");
    const auto role = m.at("role").get<std::string>();
    if (role != "system" && role != "developer" && role != "user" && role != "assistant")
      return bad(role_field, role_field + " must be system, developer, user or assistant");
    std::string content;
    if (auto e = message_content(m, i, content))
      return e;
    turns.emplace_back(role, std::move(content));
  }
  return text_to_tokens(chat_prompt(turns), "messages", limits, out);
}

std::optional<http_error> parse_max_tokens(api kind, const json& body, const request_limits& limits,
                                           uint32_t prompt_tokens, uint32_t& out) {
  const char* field = "max_tokens";
  if (kind == api::chat && present(body, "max_completion_tokens"))
    field = "max_completion_tokens";
  out = limits.max_tokens_default;
  if (present(body, field)) {
    const auto& m = body.at(field);
    if (!m.is_number_integer() || m.get<int64_t>() < 1)
      return bad(field, fmt::format("{} must be a positive integer", field));
    if (m.get<int64_t>() > limits.context_tokens_max)
      return bad(field, fmt::format("{} is at most the model's context, {} tokens", field,
                                    limits.context_tokens_max));
    out = m.get<uint32_t>();
  }
  if (uint64_t{prompt_tokens} + out > limits.context_tokens_max)
    return bad(field, fmt::format("the prompt's {} tokens and {} {} exceed the model's context of "
                                  "{} tokens",
                                  prompt_tokens, field, out, limits.context_tokens_max));
  return std::nullopt;
}

std::optional<http_error> parse_stream(const json& body, completion_request& out) {
  if (present(body, "stream")) {
    if (!body.at("stream").is_boolean())
      return bad("stream", "stream must be true or false");
    out.stream = body.at("stream").get<bool>();
  }
  if (!present(body, "stream_options"))
    return std::nullopt;
  const auto& so = body.at("stream_options");
  if (!out.stream)
    return bad("stream_options", "stream_options is only allowed with stream: true");
  if (!so.is_object())
    return bad("stream_options", "stream_options must be an object");
  if (so.contains("include_usage")) {
    if (!so.at("include_usage").is_boolean())
      return bad("stream_options.include_usage", "include_usage must be true or false");
    out.include_usage = so.at("include_usage").get<bool>();
  }
  return std::nullopt;
}

} // namespace

std::variant<completion_request, http_error> parse_request(api kind, std::string_view body_text,
                                                           const request_limits& limits) {
  if (deeper_than(body_text, limits.json_depth_max))
    return bad({}, fmt::format("the body nests deeper than {} levels", limits.json_depth_max));
  auto body = json::parse(body_text, nullptr, false);
  if (body.is_discarded())
    return bad({}, "the body is not JSON");
  if (!body.is_object())
    return bad({}, "the body must be a JSON object");
  if (!body.contains("model") || !body.at("model").is_string())
    return bad("model", "model is required and must be a string");
  if (body.at("model").get<std::string>() != limits.model)
    return http_error{404, "invalid_request_error",
                      fmt::format("the model `{}` does not exist; this server serves `{}`",
                                  body.at("model").get<std::string>(), limits.model),
                      "model", "model_not_found"};
  if (auto e = check_sampling(body))
    return *e;
  completion_request out;
  out.kind = kind;
  auto e = kind == api::chat ? chat_messages(body, limits, out.prompt)
                             : completion_prompt(body, limits, out.prompt);
  if (e)
    return *e;
  if (out.prompt.empty())
    return bad(kind == api::chat ? "messages" : "prompt", "the prompt is empty");
  if (auto e2 = parse_max_tokens(kind, body, limits, static_cast<uint32_t>(out.prompt.size()),
                                 out.max_tokens))
    return *e2;
  if (auto e3 = parse_stream(body, out))
    return *e3;
  return out;
}

std::string chat_prompt(const std::vector<std::pair<std::string, std::string>>& messages) {
  std::string out;
  for (const auto& [role, content] : messages)
    out += role + ": " + content + "\n";
  return out + "assistant: ";
}

namespace {

std::string dump(const json& j) {
  // Every string in it is UTF-8 already; replace rather than throw should one not be.
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

json usage_object(const usage& u) {
  return {{"prompt_tokens", u.prompt_tokens},
          {"completion_tokens", u.completion_tokens},
          {"total_tokens", u.prompt_tokens + u.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}}};
}

json head_object(const answer_head& h, const char* object) {
  return {{"id", h.id}, {"object", object}, {"created", h.created_s}, {"model", h.model}};
}

} // namespace

std::string completion_json(const answer_head& head, const std::string& text,
                            const std::string& finish_reason, const usage& u) {
  json choice = {{"index", 0}, {"finish_reason", finish_reason}};
  json out;
  if (head.kind == api::chat) {
    out = head_object(head, "chat.completion");
    choice["message"] = {{"role", "assistant"}, {"content", text}};
  } else {
    out = head_object(head, "text_completion");
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  out["choices"] = json::array({choice});
  out["usage"] = usage_object(u);
  return dump(out);
}

std::string chunk_event(const answer_head& head, const std::string& text, bool first,
                        const std::optional<std::string>& finish_reason) {
  json choice = {{"index", 0}};
  choice["finish_reason"] = finish_reason ? json(*finish_reason) : json(nullptr);
  json out;
  if (head.kind == api::chat) {
    out = head_object(head, "chat.completion.chunk");
    json delta = json::object();
    if (first)
      delta["role"] = "assistant";
    if (!text.empty() || !finish_reason)
      delta["content"] = text;
    choice["delta"] = delta;
  } else {
    out = head_object(head, "text_completion");
    choice["text"] = text;
    choice["logprobs"] = nullptr;
  }
  out["choices"] = json::array({choice});
  return "data: " + dump(out) + "\n\n";
}

std::string usage_event(const answer_head& head, const usage& u) {
  auto out =
      head_object(head, head.kind == api::chat ? "chat.completion.chunk" : "text_completion");
  out["choices"] = json::array();
  out["usage"] = usage_object(u);
  return "data: " + dump(out) + "\n\n";
}

namespace {
constexpr std::string_view timing_comment_prefix = ": crescent-timing ";
constexpr const char* timing_comment_format =
    "handler_ns=%lld arrival_ns=%lld first_token_ns=%lld first_event_ns=%lld";
} // namespace

std::string timing_comment(const server_timing& t) {
  return fmt::format("{}handler_ns={} arrival_ns={} first_token_ns={} first_event_ns={}\n\n",
                     timing_comment_prefix, t.handler_ns, t.arrival_ns, t.first_token_ns,
                     t.first_event_ns);
}

std::optional<server_timing> parse_timing_comment(std::string_view line) {
  if (line.rfind(timing_comment_prefix, 0) != 0 || line.size() > 256)
    return std::nullopt;
  const std::string rest{line.substr(timing_comment_prefix.size())};
  long long handler = 0, arrival = 0, token = 0, event = 0;
  if (std::sscanf(rest.c_str(), timing_comment_format, &handler, &arrival, &token, &event) != 4)
    return std::nullopt;
  return server_timing{handler, arrival, token, event};
}

std::string error_json(const http_error& e) {
  json err = {{"message", e.message}, {"type", e.type}};
  err["param"] = e.param.empty() ? json(nullptr) : json(e.param);
  err["code"] = e.code.empty() ? json(nullptr) : json(e.code);
  return dump(json{{"error", err}});
}

std::string error_event(const http_error& e) {
  return "data: " + error_json(e) + "\n\n";
}

std::string models_json(const std::string& model, int64_t created_s) {
  json m = {{"id", model}, {"object", "model"}, {"created", created_s}, {"owned_by", "crescent"}};
  return dump(json{{"object", "list"}, {"data", json::array({m})}});
}

namespace {

constexpr std::string_view replacement = "\xEF\xBF\xBD"; // U+FFFD

// The range the second byte of a sequence led by `lead` must fall in (no overlong forms, no
// surrogates, nothing above U+10FFFF).
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
  case 0xE0:
    return b >= 0xA0 && b <= 0xBF;
  case 0xED:
    return b >= 0x80 && b <= 0x9F;
  case 0xF0:
    return b >= 0x90 && b <= 0xBF;
  case 0xF4:
    return b >= 0x80 && b <= 0x8F;
  default:
    return b >= 0x80 && b <= 0xBF;
  }
}

} // namespace

std::string utf8_decoder::push(std::span<const uint32_t> tokens) {
  std::string out;
  for (uint32_t t : tokens) {
    if (t > 0xFF) {
      out += flush();
      out += replacement;
      continue;
    }
    const auto b = static_cast<unsigned char>(t);
    if (need_ > 0) {
      const auto lead = static_cast<unsigned char>(pending_[0]);
      const bool ok = pending_.size() == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
      if (ok) {
        pending_ += static_cast<char>(b);
        if (--need_ == 0) {
          out += pending_;
          pending_.clear();
        }
        continue;
      }
      out += flush(); // the unfinished character, then `b` starts afresh
    }
    if (b < 0x80) {
      out += static_cast<char>(b);
    } else if (b >= 0xC2 && b <= 0xF4) {
      pending_ = static_cast<char>(b);
      need_ = b < 0xE0 ? 1 : (b < 0xF0 ? 2 : 3);
    } else {
      out += replacement;
    }
  }
  return out;
}

std::string utf8_decoder::flush() {
  if (pending_.empty())
    return {};
  pending_.clear();
  need_ = 0;
  return std::string{replacement};
}

std::string tokens_to_text(std::span<const uint32_t> tokens) {
  utf8_decoder d;
  auto out = d.push(tokens);
  return out + d.flush();
}

} // namespace crescent::serve
