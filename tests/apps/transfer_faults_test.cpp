// crescent up's transfer faults in one process: the flags a node process reads, and the hook
// that a queued signal switches on and off (the signal sent to this very process, as the fault
// runner sends it to the main process of a run).
#include "apps/up/transfer_faults.hpp"

#include "messages/errors.hpp"
#include "transport/host_memory.hpp"
#include "transport/transfer_engine.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

namespace crescent::up {
namespace {

using namespace transport;

TEST(transfer_faults, flags_read_back_what_the_plan_said) {
  auto plan = parse_fault_plan("faults:\n"
                               "  - {at_ms: 0, kill: 1}\n"
                               "  - {at_ms: 5, corrupt: 0.125, node: 2}\n"
                               "  - {at_ms: 9, fail_transfer: 0.3}\n"
                               "  - {at_ms: 9, delay_transfer: 0.5, delay_ms: 20, node: 1}\n",
                               "p.yaml");
  ASSERT_TRUE(plan) << crescent::describe(plan.error());
  const auto faults = transfer_faults_of(*plan);
  ASSERT_EQ(faults.size(), 3u);
  EXPECT_EQ(faults[0], (transfer_fault_spec{fault_kind::corrupt, 0.125, 2u}));
  EXPECT_EQ(faults[1], (transfer_fault_spec{fault_kind::fail_transfer, 0.3, std::nullopt}));
  EXPECT_EQ(faults[2], (transfer_fault_spec{fault_kind::delay_transfer, 0.5, 1u, 20}));
  const auto text = format_transfer_faults(faults);
  EXPECT_EQ(text, "corrupt:0.125:2,fail_transfer:0.3:any,delay_transfer:0.5:1:20");
  auto back = parse_transfer_faults(text);
  ASSERT_TRUE(back) << crescent::describe(back.error());
  EXPECT_EQ(*back, faults);
}

TEST(transfer_faults, a_bad_flag_names_its_entry_and_what_is_wrong) {
  auto error_of = [](const std::string& text) {
    auto f = parse_transfer_faults(text);
    EXPECT_FALSE(f) << text;
    return f ? std::string{} : crescent::describe(f.error());
  };
  auto e = error_of("corrupt:0.5:any,drop:0.5:any");
  EXPECT_NE(e.find("entry 2 ('drop:0.5:any'): the kind is fail_transfer, corrupt or "
                   "delay_transfer"),
            std::string::npos)
      << e;
  EXPECT_NE(
      error_of("delay_transfer:0.5:any").find("expected delay_transfer:PROBABILITY:NODE:DELAY_MS"),
      std::string::npos);
  EXPECT_NE(error_of("delay_transfer:0.5:any:0").find("the delay is a number of ms in [1, "),
            std::string::npos);
  EXPECT_NE(error_of("delay_transfer:0.5:any:3600001").find("[1, 3600000]"), std::string::npos);
  EXPECT_NE(error_of("delay_transfer:0.5:any:5ms").find("the delay is"), std::string::npos);
  EXPECT_NE(error_of("corrupt:0.5:any:3").find("expected KIND:PROBABILITY:NODE"),
            std::string::npos);
  EXPECT_NE(error_of("corrupt:0:any").find("the probability is a number in (0, 1]"),
            std::string::npos);
  EXPECT_NE(error_of("corrupt:1.5:any").find("(0, 1]"), std::string::npos);
  EXPECT_NE(error_of("corrupt:nan:any").find("(0, 1]"), std::string::npos);
  EXPECT_NE(error_of("corrupt:0.5x:any").find("(0, 1]"), std::string::npos);
  EXPECT_NE(error_of("corrupt:0.5:-1").find("the node is 'any' or a number below 256"),
            std::string::npos);
  EXPECT_NE(error_of("corrupt:0.5:256").find("below 256"), std::string::npos);
  EXPECT_NE(error_of("corrupt:0.5").find("expected KIND:PROBABILITY:NODE"), std::string::npos);
  EXPECT_NE(error_of("").find("entry 1 (''): expected"), std::string::npos);
  EXPECT_NE(error_of("corrupt:0.5:1,").find("entry 2"), std::string::npos);
  std::string many;
  for (size_t i = 0; i <= transfer_faults_max; ++i)
    many += std::string{many.empty() ? "" : ","} + "corrupt:0.5:any";
  EXPECT_NE(error_of(many).find("more than 64 faults"), std::string::npos);
}

class switched : public ::testing::Test {
 protected:
  void SetUp() override {
    engine = *transfer_engine::create_local(1);
    memory = std::move(*host_memory::allocate(4096));
    region = *engine->register_region(1, memory.data(), memory.size_bytes());
  }

  op_result write_once() {
    std::vector<std::byte> data(1000, std::byte{0x77});
    transfer_op op{op_kind::write, data, region, 0, true};
    auto id = engine->submit(std::span{&op, 1}, clock_type::now() + std::chrono::seconds(5));
    EXPECT_TRUE(id);
    return (*engine->wait(*id))[0];
  }

  std::shared_ptr<transfer_engine> engine;
  host_memory memory;
  region_handle region;
};

TEST_F(switched, a_fault_takes_slices_only_while_a_signal_has_it_switched_on) {
  ASSERT_FALSE(install_transfer_faults(
      *engine, {{fault_kind::corrupt, 1.0, 9u}, {fault_kind::fail_transfer, 1.0, std::nullopt}}, 7,
      0));
  EXPECT_EQ(write_once().state, op_state::completed) << "every fault starts off";
  // A signal a process sends itself is taken before sigqueue returns (POSIX).
  ASSERT_FALSE(switch_transfer_fault(getpid(), 0, true));
  EXPECT_EQ(write_once().state, op_state::completed) << "fault 0 is for slices with node 9 only";
  ASSERT_FALSE(switch_transfer_fault(getpid(), 1, true));
  auto r = write_once();
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_NE(crescent::describe(r.reason).find("injected fault"), std::string::npos)
      << crescent::describe(r.reason);
  ASSERT_FALSE(switch_transfer_fault(getpid(), 1, false));
  EXPECT_EQ(write_once().state, op_state::completed);
  // The engine tried the slice again (slice_attempts_max), and each attempt was taken.
  const uint64_t attempts = transfer_options{}.slice_attempts_max;
  const auto taken = transfer_faults_taken_here();
  EXPECT_EQ(taken.failed, attempts);
  EXPECT_EQ(taken.corrupted, 0u);
  // A new install starts with every fault off again and the counts at zero.
  ASSERT_FALSE(install_transfer_faults(*engine, {{fault_kind::corrupt, 1.0, 1u}}, 7, 0));
  EXPECT_EQ(transfer_faults_taken_here().failed, 0u);
  EXPECT_EQ(write_once().state, op_state::completed);
  ASSERT_FALSE(switch_transfer_fault(getpid(), 0, true));
  r = write_once();
  EXPECT_EQ(r.state, op_state::failed);
  EXPECT_TRUE(is(r.reason, errc::checksum_mismatch)) << crescent::describe(r.reason);
  EXPECT_EQ(transfer_faults_taken_here().corrupted, attempts);
  engine->set_fault_hook({});
}

TEST_F(switched, a_delay_holds_each_slice_it_takes_and_the_write_still_lands) {
  ASSERT_FALSE(install_transfer_faults(
      *engine, {{fault_kind::delay_transfer, 1.0, std::nullopt, 25}}, 7, 0));
  ASSERT_FALSE(switch_transfer_fault(getpid(), 0, true));
  const auto start = clock_type::now();
  const auto r = write_once();
  EXPECT_GE(clock_type::now() - start, std::chrono::milliseconds(25)) << "held in the delay line";
  EXPECT_EQ(r.state, op_state::completed) << crescent::describe(r.reason);
  EXPECT_EQ(memory.data()[999], std::byte{0x77});
  const auto taken = transfer_faults_taken_here();
  EXPECT_EQ(taken.delayed, 1u) << "one slice, one attempt: a delay is no failure to retry";
  EXPECT_EQ(taken.failed + taken.corrupted, 0u);
  engine->set_fault_hook({});
}

TEST_F(switched, a_probability_takes_about_that_share_and_the_same_seed_the_same_slices) {
  auto outcomes = [&](uint64_t seed) {
    EXPECT_FALSE(
        install_transfer_faults(*engine, {{fault_kind::fail_transfer, 0.25, {}}}, seed, 3));
    EXPECT_FALSE(switch_transfer_fault(getpid(), 0, true));
    std::vector<bool> failed;
    for (int i = 0; i < 400; ++i)
      failed.push_back(write_once().state == op_state::failed);
    // Each attempt is drawn: an operation fails when all its slice's attempts were taken.
    const auto taken = transfer_faults_taken_here().failed;
    EXPECT_GT(taken, 90u) << "about a quarter of some 525 attempts";
    EXPECT_LT(taken, 175u);
    return failed;
  };
  const auto a = outcomes(11);
  const auto n = std::count(a.begin(), a.end(), true);
  EXPECT_GT(n, 0);
  EXPECT_LT(n, 25) << "about 400 x 0.25^3";
  EXPECT_EQ(outcomes(11), a);
  EXPECT_NE(outcomes(12), a);
  engine->set_fault_hook({});
}

TEST(transfer_faults, a_gone_process_is_an_error_that_says_so) {
  // The highest pid the kernel may hand out, plus one: no process has it.
  auto err = switch_transfer_fault(4194305, 0, true);
  ASSERT_TRUE(err);
  EXPECT_NE(crescent::describe(err).find("in process 4194305"), std::string::npos)
      << crescent::describe(err);
}

} // namespace
} // namespace crescent::up
