// The OpenAI shapes of `crescent serve`: bodies to requests (every refusal names its field) and
// results to JSON, and the UTF-8 decoding of one-byte tokens.
#include "apps/serve/openai.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace crescent::serve {
namespace {

using json = nlohmann::json;

request_limits limits() {
  request_limits l;
  l.model = "m";
  l.vocab = 256;
  l.context_tokens_max = 64;
  l.max_tokens_default = 16;
  return l;
}

completion_request ok(api kind, const std::string& body) {
  auto r = parse_request(kind, body, limits());
  if (auto* e = std::get_if<http_error>(&r)) {
    ADD_FAILURE() << body << ": " << e->message;
    return {};
  }
  return std::get<completion_request>(r);
}

http_error refused(api kind, const std::string& body) {
  auto r = parse_request(kind, body, limits());
  if (!std::holds_alternative<http_error>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<http_error>(r);
}

TEST(openai, a_completion_prompt_is_its_bytes) {
  auto r = ok(api::completions, R"({"model":"m","prompt":"Hi!","max_tokens":4})");
  EXPECT_EQ(r.prompt, (std::vector<uint32_t>{'H', 'i', '!'}));
  EXPECT_EQ(r.max_tokens, 4u);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(ok(api::completions, R"({"model":"m","prompt":[1,2,255]})").prompt,
            (std::vector<uint32_t>{1, 2, 255}));
  EXPECT_EQ(ok(api::completions, R"({"model":"m","prompt":["ab"]})").prompt.size(), 2u);
  EXPECT_EQ(ok(api::completions, R"({"model":"m","prompt":"a"})").max_tokens, 16u);
}

TEST(openai, a_chat_becomes_one_prompt_of_role_lines) {
  auto r = ok(api::chat, R"({"model":"m","messages":[{"role":"system","content":"S"},
      {"role":"user","content":[{"type":"text","text":"U"}]}],"max_completion_tokens":3,
      "stream":true,"stream_options":{"include_usage":true}})");
  const std::string expected = "system: S\nuser: U\nassistant: ";
  EXPECT_EQ(r.prompt, std::vector<uint32_t>(expected.begin(), expected.end()));
  EXPECT_EQ(r.max_tokens, 3u);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(openai, greedy_settings_are_accepted_and_sampling_is_refused_by_name) {
  ok(api::completions, R"({"model":"m","prompt":"a","temperature":0,"top_p":1,"n":1,
      "seed":3,"user":"u","top_logprobs":null})");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","temperature":0.7})").param,
            "temperature");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","top_p":0.9})").param, "top_p");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","n":2})").param, "n");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","stop":"x"})").param, "stop");
  EXPECT_EQ(refused(api::chat, R"({"model":"m","messages":[{"role":"user","content":"a"}],
      "tools":[]})")
                .param,
            "tools");
}

TEST(openai, bad_bodies_are_400_naming_the_field) {
  EXPECT_EQ(refused(api::completions, "not json").status, 400);
  EXPECT_EQ(refused(api::completions, "[1]").message, "the body must be a JSON object");
  EXPECT_EQ(refused(api::completions, R"({"prompt":"a"})").param, "model");
  EXPECT_EQ(refused(api::completions, R"({"model":"m"})").param, "prompt");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":""})").param, "prompt");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":7})").param, "prompt");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":[1,256]})").param, "prompt");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":["a","b"]})").param, "prompt");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","max_tokens":0})").param,
            "max_tokens");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","max_tokens":"4"})").param,
            "max_tokens");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","max_tokens":64})").param,
            "max_tokens"); // 1 + 64 > the context of 64
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","stream":"yes"})").param,
            "stream");
  EXPECT_EQ(refused(api::completions, R"({"model":"m","prompt":"a","stream_options":{}})").param,
            "stream_options");
  EXPECT_EQ(refused(api::chat, R"({"model":"m","messages":[]})").param, "messages");
  EXPECT_EQ(
      refused(api::chat, R"({"model":"m","messages":[{"role":"robot","content":"a"}]})").param,
      "messages[0].role");
  EXPECT_EQ(refused(api::chat, R"({"model":"m","messages":[{"role":"user"}]})").param,
            "messages[0].content");
  EXPECT_EQ(refused(api::chat, R"({"model":"m","messages":[{"role":"user","content":[
      {"type":"image_url","image_url":{"url":"x"}}]}]})")
                .param,
            "messages[0].content");
}

TEST(openai, another_model_is_404_model_not_found) {
  auto e = refused(api::completions, R"({"model":"gpt-4","prompt":"a"})");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_EQ(e.param, "model");
}

TEST(openai, bytes_outside_the_vocabulary_and_deep_nesting_are_refused) {
  auto l = limits();
  l.vocab = 128;
  auto r = parse_request(api::completions, "{\"model\":\"m\",\"prompt\":\"\xC3\xA9\"}", l);
  ASSERT_TRUE(std::holds_alternative<http_error>(r));
  EXPECT_NE(std::get<http_error>(r).message.find("vocabulary of 128"), std::string::npos);
  const std::string deep(100, '[');
  EXPECT_NE(refused(api::completions, deep).message.find("nests deeper"), std::string::npos);
  // Brackets inside strings are not nesting.
  ok(api::completions, R"({"model":"m","prompt":")" + std::string(40, '[') + R"("})");
}

TEST(openai, utf8_characters_split_across_pushes_come_out_whole) {
  utf8_decoder d;
  const std::string euro = "\xE2\x82\xAC"; // U+20AC, three bytes
  std::vector<uint32_t> a{'x', 0xE2}, b{0x82}, c{0xAC, 'y'};
  EXPECT_EQ(d.push(a), "x");
  EXPECT_EQ(d.push(b), "");
  EXPECT_EQ(d.push(c), euro + "y");
  EXPECT_EQ(d.flush(), "");
}

TEST(openai, bytes_that_are_not_utf8_become_replacement_characters) {
  const std::string fffd = "\xEF\xBF\xBD";
  std::vector<uint32_t> lone{0x80, 'a'}, overlong{0xC0, 0xAF}, cut{0xE2, 'b'}, tail{0xF0, 0x9F};
  EXPECT_EQ(tokens_to_text(lone), fffd + "a");
  EXPECT_EQ(tokens_to_text(overlong), fffd + fffd);
  EXPECT_EQ(tokens_to_text(cut), fffd + "b");
  EXPECT_EQ(tokens_to_text(tail), fffd); // unfinished at the end
  std::vector<uint32_t> surrogate{0xED, 0xA0, 0x80};
  EXPECT_EQ(tokens_to_text(surrogate), fffd + fffd + fffd);
}

TEST(openai, answers_have_openais_shapes) {
  answer_head chat{api::chat, "chatcmpl-1", 100, "m"};
  auto j = json::parse(completion_json(chat, "hi", "length", {5, 2, 3}));
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["content"], "hi");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["usage"]["total_tokens"], 7);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 3);
  answer_head text{api::completions, "cmpl-1", 100, "m"};
  EXPECT_EQ(json::parse(completion_json(text, "x", "stop", {}))["choices"][0]["text"], "x");

  const auto first = chunk_event(chat, "a", true, std::nullopt);
  ASSERT_EQ(first.substr(0, 6), "data: ");
  ASSERT_EQ(first.substr(first.size() - 2), "\n\n");
  auto c = json::parse(first.substr(6));
  EXPECT_EQ(c["object"], "chat.completion.chunk");
  EXPECT_EQ(c["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(c["choices"][0]["delta"]["content"], "a");
  EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null());
  auto last = json::parse(chunk_event(chat, "", false, "length").substr(6));
  EXPECT_EQ(last["choices"][0]["finish_reason"], "length");
  EXPECT_FALSE(last["choices"][0]["delta"].contains("content"));
  auto u = json::parse(usage_event(chat, {1, 2, 0}).substr(6));
  EXPECT_TRUE(u["choices"].empty());
  EXPECT_EQ(u["usage"]["completion_tokens"], 2);

  auto e = json::parse(error_json({429, "rate_limit_error", "busy", {}, "slo_unattainable"}));
  EXPECT_EQ(e["error"]["message"], "busy");
  EXPECT_TRUE(e["error"]["param"].is_null());
  EXPECT_EQ(e["error"]["code"], "slo_unattainable");
  auto m = json::parse(models_json("m", 5));
  EXPECT_EQ(m["data"][0]["id"], "m");
}

TEST(openai, a_timing_comment_reads_back_and_other_lines_do_not) {
  const auto line = timing_comment({1'000'000'000'000, 1'000'000'140'000, 1'000'002'640'000, -1});
  ASSERT_TRUE(line.starts_with(": ")) << line; // a server-sent comment: clients skip it
  ASSERT_TRUE(line.ends_with("\n\n")) << line;
  auto t = parse_timing_comment(std::string_view{line}.substr(0, line.size() - 2));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->handler_ns, 1'000'000'000'000);
  EXPECT_EQ(t->arrival_ns, 1'000'000'140'000);
  EXPECT_EQ(t->first_token_ns, 1'000'002'640'000);
  EXPECT_EQ(t->first_event_ns, -1);
  for (const char* other : {"", ": keep-alive", "data: [DONE]", ": crescent-timing handler_ns=1",
                            ": crescent-timing handler_ns=x arrival_ns=1 first_token_ns=1 "
                            "first_event_ns=1"})
    EXPECT_FALSE(parse_timing_comment(other)) << other;
}

} // namespace
} // namespace crescent::serve
