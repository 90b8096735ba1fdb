// configs/tiny_transformer.json learns its synthetic sequence task on the CPU reference in fp32
// and both AMP modes: well above what any attention-free model can reach (12.1%), with the loss
// falling and no skipped steps.
#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/spec.h"
#include "models/synthetic_sequences.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace mpbench;

class TinyTransformerLearns : public ::testing::TestWithParam<Precision> {};

TEST_P(TinyTransformerLearns, FarAboveTheAttentionFreeBound) {
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_transformer.json");
  spec.train.epochs = 2;  // the config's 4 reach 100% in fp32; 2 keep this file short
  const auto& t = std::get<TransformerSpec>(spec.model);
  auto be = make_cpu_backend();
  const Dataset data = make_dataset(spec);
  const RunResult r = train_and_measure(spec, data, GetParam(), *be);
  ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
  ASSERT_EQ(r.epochs.size(), 2u);
  const double bound = attention_free_accuracy_bound(t.seq_len, t.vocab_size);
  EXPECT_LT(bound, 0.13);
  // Measured after 2 epochs: fp32 99.1%, amp_fp16 98.1%, amp_bf16 98.8% (see the report).
  EXPECT_GT(r.final_accuracy, 0.9) << precision_name(GetParam());
  EXPECT_LT(r.epochs.back().train_loss, r.epochs.front().train_loss);
  EXPECT_LT(r.final_loss, 0.5);
  EXPECT_EQ(r.skipped_steps, 0);
  const bool amp = precision_info(GetParam()).master_weights;
  EXPECT_EQ(r.memory.by_category[static_cast<int>(MemCategory::MasterWeights)] > 0, amp);
}

INSTANTIATE_TEST_SUITE_P(Modes, TinyTransformerLearns,
                         ::testing::Values(Precision::FP32, Precision::AMP_FP16,
                                           Precision::AMP_BF16),
                         [](const auto& info) { return std::string(precision_name(info.param)); });
