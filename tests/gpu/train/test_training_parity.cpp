// A 50-step training run on the GPU follows the CPU reference step by step: per-step loss within
// 1e-4 (fp32) or 2e-2 (AMP modes) relative, and the loss-scale trajectory exactly.
#include <cmath>

#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace mpbench;

class TrainingParity : public ::testing::TestWithParam<Precision> {};

TEST_P(TrainingParity, FiftyStepsMatchCpu) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << why;
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  spec.train.epochs = 1;
  spec.train.warmup_steps = 0;
  spec.data.train_samples = 50 * spec.train.batch_size;
  spec.loss_scale.growth_interval = 10;  // the scale moves within 50 steps
  Dataset data = make_dataset(spec);
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  RunResult rc = train_and_measure(spec, data, GetParam(), *cpu);
  RunResult rg = train_and_measure(spec, data, GetParam(), *gpu);
  ASSERT_EQ(rc.status, RunStatus::Ok);
  ASSERT_EQ(rg.status, RunStatus::Ok) << rg.status_detail;
  ASSERT_EQ(rc.steps.size(), 50u);
  ASSERT_EQ(rg.steps.size(), 50u);
  const double tol = precision_info(GetParam()).master_weights ? 2e-2 : 1e-4;
  for (size_t i = 0; i < 50; ++i) {
    double a = rc.steps[i].loss, b = rg.steps[i].loss;
    EXPECT_LE(std::fabs(a - b), tol * std::fabs(a))
        << "step " << i << ": cpu " << a << " gpu " << b;
    EXPECT_EQ(rc.steps[i].loss_scale, rg.steps[i].loss_scale) << "step " << i;
    EXPECT_EQ(rc.steps[i].skipped, rg.steps[i].skipped) << "step " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(AllModes, TrainingParity,
                         ::testing::Values(Precision::FP32, Precision::TF32, Precision::AMP_FP16,
                                           Precision::AMP_BF16),
                         [](const auto& info) { return std::string(precision_name(info.param)); });

TEST(CudaRun, GraphsMatchEager) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << why;
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  spec.train.epochs = 1;
  Dataset data = make_dataset(spec);
  auto gpu = make_cuda_backend(0);
  RunResult eager = train_and_measure(spec, data, Precision::AMP_FP16, *gpu);
  TrainOptions opts;
  opts.cuda_graphs = true;
  RunResult graph = train_and_measure(spec, data, Precision::AMP_FP16, *gpu, opts);
  ASSERT_EQ(graph.status, RunStatus::Ok) << graph.status_detail;
  EXPECT_TRUE(graph.cuda_graphs);
  ASSERT_EQ(eager.steps.size(), graph.steps.size());
  for (size_t i = 0; i < eager.steps.size(); ++i)
    EXPECT_FLOAT_EQ(eager.steps[i].loss, graph.steps[i].loss) << "step " << i;
  EXPECT_GT(graph.memory.device_peak, 0u);
}

TEST(CudaRun, OutOfMemoryIsARow) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << why;
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  // ~1.1e12 fp32 parameters do not fit on any card.
  std::get<MlpSpec>(spec.model).hidden = {1 << 20, 1 << 20};
  spec.train.epochs = 1;
  Dataset data = make_dataset(spec);
  auto gpu = make_cuda_backend(0);
  RunResult r = train_and_measure(spec, data, Precision::FP32, *gpu);
  EXPECT_EQ(r.status, RunStatus::Oom);
  EXPECT_NE(r.status_detail.find("out of memory"), std::string::npos) << r.status_detail;
  // The device is usable afterwards.
  spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  spec.train.epochs = 1;
  RunResult ok = train_and_measure(spec, data, Precision::FP32, *gpu);
  EXPECT_EQ(ok.status, RunStatus::Ok) << ok.status_detail;
}
