#include "apps/replay/report.hpp"
#include "apps/replay/trace.hpp"
#include "apps/replay/transfer_report.hpp"
#include "apps/replay/workload.hpp"
#include "messages/errors.hpp"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

namespace crescent::replay {
namespace {

std::string error_of(const std::string& line) {
  auto r = parse_trace_line(line, 17, "t.jsonl");
  EXPECT_FALSE(r) << "accepted: " << line;
  return r ? std::string{} : describe(r.error());
}

TEST(trace, parses_a_record) {
  auto r = parse_trace_line(
      R"({"timestamp": 40, "input_length": 600, "output_length": 3, "hash_ids": [7, 8]})", 1,
      "t.jsonl");
  ASSERT_TRUE(r) << describe(r.error());
  EXPECT_EQ(r->timestamp_ms, 40u);
  EXPECT_EQ(r->input_tokens, 600u);
  EXPECT_EQ(r->hash_ids, (std::vector<uint64_t>{7, 8}));
}

TEST(trace, errors_name_line_and_field) {
  auto e = error_of(R"({"timestamp": 0, "input_length": 600, "output_length": 3)");
  EXPECT_NE(e.find("t.jsonl:17: not valid JSON"), std::string::npos) << e;
  e = error_of(R"({"timestamp": 0, "output_length": 3, "hash_ids": [1]})");
  EXPECT_NE(e.find("t.jsonl:17: input_length: missing"), std::string::npos) << e;
  e = error_of(R"({"timestamp": -4, "input_length": 10, "output_length": 3, "hash_ids": [1]})");
  EXPECT_NE(e.find("timestamp"), std::string::npos) << e;
  e = error_of(R"({"timestamp": 0, "input_length": "x", "output_length": 3, "hash_ids": [1]})");
  EXPECT_NE(e.find("input_length"), std::string::npos) << e;
  e = error_of(R"({"timestamp": 0, "input_length": 1200, "output_length": 3, "hash_ids": [1]})");
  EXPECT_NE(e.find("hash_ids: 1 ids for 1200"), std::string::npos) << e;
  e = error_of(R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": ["a"]})");
  EXPECT_NE(e.find("hash_ids"), std::string::npos) << e;
  e = error_of(R"([1, 2])");
  EXPECT_NE(e.find("expected a JSON object"), std::string::npos) << e;
  e = error_of(R"({"timestamp": 0.5, "input_length": 10, "output_length": 3, "hash_ids": [1]})");
  EXPECT_NE(e.find("timestamp"), std::string::npos) << e;
}

TEST(trace, read_trace_stops_at_the_first_bad_line) {
  auto path = ::testing::TempDir() + "crescent_bad_trace.jsonl";
  {
    std::ofstream out{path};
    out << R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": [1]})"
        << "\n\n";
    out << R"({"timestamp": 0, "input_length": 10, "output_length": 3, "hash_ids": []})"
        << "\n";
  }
  auto r = read_trace(path, 0);
  ASSERT_FALSE(r);
  EXPECT_NE(describe(r.error()).find(path + ":3: hash_ids"), std::string::npos)
      << describe(r.error());
  EXPECT_TRUE(read_trace(path, 1)) << "the head is fine";
  EXPECT_FALSE(read_trace("/nonexistent.jsonl", 1));
  std::remove(path.c_str());
}

TEST(workload, equal_hash_ids_give_equal_token_blocks) {
  workload_options w;
  w.block_tokens = 16;
  w.vocab = 100;
  trace_record a{1, 1000, 1100, 10, {5, 6, 7}};
  trace_record b{2, 2000, 1030, 10, {5, 6, 9}};
  auto sa = synthesize(a, 0, w);
  auto sb = synthesize(b, 1, w);
  EXPECT_EQ(sa.tokens.size(), 35u); // ceil(1100 * 16 / 512)
  EXPECT_EQ(sb.tokens.size(), 33u);
  EXPECT_TRUE(std::equal(sa.tokens.begin(), sa.tokens.begin() + 32, sb.tokens.begin()));
  EXPECT_NE(sa.tokens[32], sb.tokens[32]);
  for (auto t : sa.tokens)
    EXPECT_LT(t, 100u);
  EXPECT_EQ(sa.max_new_tokens, 10u);
  EXPECT_EQ(sa.arrival_ns, 1000u * 1000000u);
  w.speedup = 4;
  w.output_scale = 0.01;
  auto fast = synthesize(a, 0, w);
  EXPECT_EQ(fast.arrival_ns, 250u * 1000000u);
  EXPECT_EQ(fast.max_new_tokens, 1u) << "at least one output token";
}

TEST(workload, kv_send_pairs_are_twins_one_sent_after_and_one_streamed) {
  workload_options w;
  w.block_tokens = 16;
  w.vocab = 100;
  const std::vector<trace_record> records{{1, 1000, 1100, 10, {5, 6, 7}},
                                          {2, 2000, 1030, 10, {5, 6, 9}}};
  auto reqs = kv_send_pairs(records, w);
  ASSERT_EQ(reqs.size(), 4u);
  for (uint64_t i = 0; i < 4; ++i)
    EXPECT_EQ(reqs[i].id, i);
  EXPECT_EQ(reqs[0].kv_send, wire::KvSend::AFTER);
  EXPECT_EQ(reqs[1].kv_send, wire::KvSend::STREAM);
  EXPECT_EQ(reqs[2].kv_send, wire::KvSend::STREAM) << "which twin goes first alternates";
  EXPECT_EQ(reqs[3].kv_send, wire::KvSend::AFTER);
  for (size_t i = 0; i < 4; i += 2) {
    EXPECT_EQ(reqs[i].tokens, synthesize(records[i / 2], i, w).tokens) << "the record itself";
    EXPECT_EQ(reqs[i + 1].tokens.size(), reqs[i].tokens.size());
    EXPECT_EQ(reqs[i + 1].arrival_ns, reqs[i].arrival_ns);
    EXPECT_EQ(reqs[i + 1].max_new_tokens, reqs[i].max_new_tokens);
    EXPECT_FALSE(
        std::equal(reqs[i].tokens.begin(), reqs[i].tokens.begin() + 16, reqs[i + 1].tokens.begin()))
        << "a twin shares no block with its record";
  }
  // The twins share their prefix as the records do.
  EXPECT_TRUE(
      std::equal(reqs[1].tokens.begin(), reqs[1].tokens.begin() + 32, reqs[3].tokens.begin()));
  EXPECT_NE(reqs[1].tokens[32], reqs[3].tokens[32]);
}

TEST(report, percentiles_and_tbt) {
  std::vector<double> v{5, 1, 4, 2, 3, 6, 7, 8, 9, 10};
  auto p = percentiles_of(v);
  EXPECT_EQ(p.p50, 5);
  EXPECT_EQ(p.p90, 9);
  EXPECT_EQ(p.p99, 10);
  // Intervals 1, 1, ..., 1, 11 ms: the longest 10% is the 11 ms one.
  std::vector<int64_t> t;
  for (int i = 0; i < 11; ++i)
    t.push_back(i * 1000000);
  t.push_back(t.back() + 11000000);
  EXPECT_DOUBLE_EQ(request_tbt_ms(t), 11.0);
  EXPECT_LT(request_tbt_ms({5}), 0);
}

TEST(report, summary_counts_and_hit_rate) {
  std::vector<request_result> rs(3);
  rs[0].status = outcome_status::completed;
  rs[0].prompt_tokens = 100;
  rs[0].computed_tokens = 60;
  rs[0].reused_tokens = 40;
  rs[0].remote_reused_tokens = 10;
  rs[0].ssd_reused_tokens = 5;
  rs[0].arrival_ns = 0;
  rs[0].token_times_ns = {2000000, 3000000};
  rs[1].status = outcome_status::rejected;
  rs[2].status = outcome_status::failed;
  auto s = summarize(rs);
  EXPECT_EQ(s.completed, 1u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.failed, 1u);
  EXPECT_DOUBLE_EQ(s.hit_rate(), 0.4);
  EXPECT_DOUBLE_EQ(s.ttft_ms.p50, 2.0);
  EXPECT_NE(format_summary(s).find("40.0% of prompt tokens reused from the KV pool (local DRAM "
                                   "25.0%, remote DRAM 10.0%, SSD 5.0%)"),
            std::string::npos)
      << format_summary(s);
}

TEST(report, transfer_paths_busiest_first_and_idle_ones_left_out) {
  std::vector<transport::path_metrics> paths(4);
  paths[0] = {"shm", 2, 0, 3u << 20, 3, 3, 0, 0};
  paths[1] = {"tcp", 3, 1u << 10, 5u << 20, 7, 9, 2, 1};
  paths[2] = {"rdma", 3, 0, 0, 0, 0, 0, 0};       // counted nothing
  paths[3] = {"tcp", 4, 0, 1u << 20, 0, 1, 0, 0}; // operations counted on a path that gave way
  const auto text = format_transfer_metrics(paths);
  EXPECT_EQ(text, "KV moved      tcp to node 3: 5.0 MiB written, 1.0 KiB read; 7 operations, "
                  "9 slices, 2 retries, 1 failures\n"
                  "              shm to node 2: 3.0 MiB written, 0 B read; 3 operations, "
                  "3 slices, 0 retries, 0 failures\n"
                  "              tcp to node 4: 1.0 MiB written, 0 B read; 0 operations, "
                  "1 slices, 0 retries, 0 failures\n");
  EXPECT_EQ(format_transfer_metrics({paths[2]}),
            "KV moved      nothing through the transfer engine\n");
}

} // namespace
} // namespace crescent::replay
