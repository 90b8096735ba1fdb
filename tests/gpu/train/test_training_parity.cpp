// A 50-step training run on the GPU follows the CPU reference step by step: per-step loss within
// 1e-4 (fp32) or 2e-2 (AMP modes) relative, and the loss-scale trajectory exactly.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/trainer.h"

using namespace mpbench;

// The tiny config of each model family, in every mode.
struct ParityCase {
  const char* config;
  Precision precision;
};

class TrainingParity : public ::testing::TestWithParam<ParityCase> {};

TEST_P(TrainingParity, FiftyStepsMatchCpu) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << why;
  const ParityCase& c = GetParam();
  Spec spec = load_spec(test::source_dir() + "/configs/" + c.config + ".json");
  spec.train.epochs = 1;
  spec.train.warmup_steps = 0;
  spec.data.train_samples = 50 * spec.train.batch_size;
  spec.loss_scale.growth_interval = 10;  // the scale moves within 50 steps
  Dataset data = make_dataset(spec);
  auto cpu = make_cpu_backend();
  auto gpu = make_cuda_backend(0);
  RunResult rc = train_and_measure(spec, data, c.precision, *cpu);
  RunResult rg = train_and_measure(spec, data, c.precision, *gpu);
  ASSERT_EQ(rc.status, RunStatus::Ok) << rc.status_detail;
  ASSERT_EQ(rg.status, RunStatus::Ok) << rg.status_detail;
  ASSERT_EQ(rc.steps.size(), 50u);
  ASSERT_EQ(rg.steps.size(), 50u);
  // fp32 modes: 1e-4 for the MLP (GEMMs only). Convolutions (cuDNN picks its own summation
  // order), batch statistics and the embedding gradient's atomics add more rounding differences
  // that 50 steps of training amplify, hence 1e-3 for the other families.
  const bool mlp = spec.family == "mlp";
  const double tol = precision_info(c.precision).master_weights ? 2e-2 : (mlp ? 1e-4 : 1e-3);
  for (size_t i = 0; i < 50; ++i) {
    double a = rc.steps[i].loss, b = rg.steps[i].loss;
    EXPECT_LE(std::fabs(a - b), tol * std::fabs(a))
        << "step " << i << ": cpu " << a << " gpu " << b;
    EXPECT_EQ(rc.steps[i].loss_scale, rg.steps[i].loss_scale) << "step " << i;
    EXPECT_EQ(rc.steps[i].skipped, rg.steps[i].skipped) << "step " << i;
  }
}

std::vector<ParityCase> parity_cases() {
  std::vector<ParityCase> out;
  for (const char* cfg : {"tiny_mlp", "tiny_resnet", "tiny_transformer"})
    for (Precision p : all_precisions()) out.push_back({cfg, p});
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllFamiliesAndModes, TrainingParity, ::testing::ValuesIn(parity_cases()),
                         [](const auto& info) {
                           return std::string(info.param.config) + "_" +
                                  precision_name(info.param.precision);
                         });

// The captured step replays what the eager step does, for each family (batchnorm's running
// statistics and the loss scale are updated inside the graph).
class GraphsMatchEager : public ::testing::TestWithParam<const char*> {};

TEST_P(GraphsMatchEager, AmpFp16) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << why;
  Spec spec = load_spec(test::source_dir() + "/configs/" + GetParam() + ".json");
  spec.train.epochs = 1;
  Dataset data = make_dataset(spec);
  auto gpu = make_cuda_backend(0);
  RunResult eager = train_and_measure(spec, data, Precision::AMP_FP16, *gpu);
  TrainOptions opts;
  opts.cuda_graphs = true;
  RunResult graph = train_and_measure(spec, data, Precision::AMP_FP16, *gpu, opts);
  ASSERT_EQ(eager.status, RunStatus::Ok) << eager.status_detail;
  ASSERT_EQ(graph.status, RunStatus::Ok) << graph.status_detail;
  EXPECT_TRUE(graph.cuda_graphs);
  ASSERT_EQ(eager.steps.size(), graph.steps.size());
  // Bitwise for the MLP. The transformer's embedding gradient sums with atomics, and some of
  // cuDNN's backward-filter algorithms do too, so their order varies from run to run and the
  // trajectories drift apart by rounding.
  const double tol = spec.family == "mlp" ? 0.0 : 1e-4;
  for (size_t i = 0; i < eager.steps.size(); ++i) {
    const double a = eager.steps[i].loss, b = graph.steps[i].loss;
    if (tol == 0.0)
      EXPECT_FLOAT_EQ(a, b) << "step " << i;
    else
      EXPECT_LE(std::fabs(a - b), tol * std::fabs(a)) << "step " << i;
  }
  if (tol == 0.0)
    EXPECT_DOUBLE_EQ(eager.epochs.back().eval_accuracy, graph.epochs.back().eval_accuracy);
  EXPECT_GT(graph.memory.device_peak, 0u);
}

INSTANTIATE_TEST_SUITE_P(AllFamilies, GraphsMatchEager,
                         ::testing::Values("tiny_mlp", "tiny_resnet", "tiny_transformer"),
                         [](const auto& info) { return std::string(info.param); });

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
