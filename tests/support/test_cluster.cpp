#include "support/test_cluster.hpp"

namespace crescent::testing {

std::vector<uint32_t> monolithic_tokens(const gpu::model_config& model,
                                        const std::vector<uint32_t>& prompt,
                                        uint32_t max_new_tokens) {
  gpu::engine_options options;
  options.timing = gpu::timing_mode::modeled;
  options.modeled_flops_per_s = 1e9;
  auto engine = gpu::make_reference_engine(model, options);
  EXPECT_TRUE(engine);
  const size_t total = prompt.size() + max_new_tokens;
  const size_t pages = (total + model.block_tokens - 1) / model.block_tokens;
  std::vector<std::byte> memory(pages * model.page_bytes());
  std::vector<std::byte*> ptrs;
  for (size_t i = 0; i < pages; ++i)
    ptrs.push_back(memory.data() + i * model.page_bytes());
  std::vector<uint32_t> out;
  auto first = (*engine)->prefill({ptrs, 0}, prompt);
  EXPECT_TRUE(first);
  out.push_back(first->next_token);
  uint32_t length = static_cast<uint32_t>(prompt.size());
  while (out.size() < max_new_tokens) {
    gpu::sequence_ref seq{ptrs, length};
    uint32_t input = out.back();
    auto step = (*engine)->decode(std::span{&seq, 1}, std::span{&input, 1});
    EXPECT_TRUE(step);
    out.push_back(step->next_tokens.at(0));
    ++length;
  }
  return out;
}

} // namespace crescent::testing
