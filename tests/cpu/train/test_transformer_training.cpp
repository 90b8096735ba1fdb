// configs/tiny_transformer.json and configs/tiny_gpt.json (the same with tied embeddings, as
// GPT-2) learn their synthetic sequence task on the CPU reference in every mode: well above what
// any attention-free model can reach (12.1%), with the loss falling and no skipped steps.
#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/spec.h"
#include "models/synthetic_sequences.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace mpbench;

class TinyTransformerLearns : public ::testing::TestWithParam<test::ConfigMode> {};

TEST_P(TinyTransformerLearns, FarAboveTheAttentionFreeBound) {
  const auto [config, precision] = GetParam();
#ifdef MPBENCH_TEST_ASAN
  if (test::in_training_series(precision)) GTEST_SKIP() << "this mode: test_training_series";
#endif
  Spec spec = load_spec(test::source_dir() + "/configs/" + config + ".json");
  spec.train.epochs = 2;  // tiny_transformer's 4 reach 100% in fp32; 2 keep this file short
  const auto& t = std::get<TransformerSpec>(spec.model);
  auto be = make_reference_backend();
  const Dataset data = make_dataset(spec);
  const RunResult r = train_and_measure(spec, data, precision, *be);
  ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
  ASSERT_EQ(r.epochs.size(), 2u);
  const double bound = attention_free_accuracy_bound(t.seq_len, t.vocab_size);
  EXPECT_LT(bound, 0.13);
  // Measured after 2 epochs (README): tiny_transformer fp32 99.1%, amp_fp16 98.1%, amp_bf16
  // 98.8%; tiny_gpt fp32 99.5%, tf32 99.5%, amp_fp16 99.0%, amp_bf16 98.3%.
  EXPECT_GT(r.final_accuracy, 0.95) << precision_name(precision);
  EXPECT_LT(r.epochs.back().train_loss, r.epochs.front().train_loss);
  EXPECT_LT(r.final_loss, 0.5);
  EXPECT_EQ(r.skipped_steps, 0);
  const bool amp = precision_info(precision).master_weights;
  EXPECT_EQ(r.memory.by_category[static_cast<int>(MemCategory::MasterWeights)] > 0, amp);
}

INSTANTIATE_TEST_SUITE_P(Modes, TinyTransformerLearns,
                         ::testing::Combine(::testing::Values("tiny_transformer", "tiny_gpt"),
                                            ::testing::ValuesIn(all_precisions())),
                         test::config_mode_name);
