// configs/tiny_resnet.json (two bottleneck blocks) and configs/tiny_resnet_stem.json (the
// ImageNet stem and two stages, on 32x32 images) learn their synthetic image task on the CPU
// reference in every mode: eval accuracy far above chance, and above what per-channel statistics
// of the images can give (the task hides the class in the spatial arrangement of the motif).
#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace mpbench;

class TinyResnetLearns : public ::testing::TestWithParam<test::ConfigMode> {};

TEST_P(TinyResnetLearns, BeatsChanceAndChannelStatistics) {
  const auto [config, precision] = GetParam();
#ifdef MPBENCH_TEST_ASAN
  if (test::in_training_series(precision)) GTEST_SKIP() << "this mode: test_training_series";
#endif
  const Spec spec = load_spec(test::source_dir() + "/configs/" + config + ".json");
  auto be = make_reference_backend();
  RunResult r = train_and_measure(spec, make_dataset(spec), precision, *be);
  ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
  ASSERT_EQ(r.epochs.size(), static_cast<size_t>(spec.train.epochs));
  // Chance and the per-channel-statistics classifier are both 0.25 here (test_resnet.cpp checks
  // the latter). Measured (README): tiny_resnet 96-97% in each mode; tiny_resnet_stem 100%.
  EXPECT_GT(r.final_accuracy, 0.9) << precision_name(precision);
  EXPECT_LT(r.epochs.back().train_loss, 0.5 * r.epochs.front().train_loss);
  EXPECT_EQ(r.skipped_steps, 0);
  EXPECT_GT(r.flops_per_step, 0);
  const bool amp = precision_info(precision).master_weights;
  EXPECT_EQ(r.memory.by_category[static_cast<int>(MemCategory::MasterWeights)] > 0, amp);
}

INSTANTIATE_TEST_SUITE_P(Modes, TinyResnetLearns,
                         ::testing::Combine(::testing::Values("tiny_resnet", "tiny_resnet_stem"),
                                            ::testing::ValuesIn(all_precisions())),
                         test::config_mode_name);
