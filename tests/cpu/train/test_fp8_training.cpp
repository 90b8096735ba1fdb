// amp_fp8 on the CPU reference: tiny_mlp and tiny_transformer train to within 1.5 points of
// amp_bf16 (issue 18's bar; figures in the README) on average over four training seeds, and the
// run's delayed-scaling series obey the rule step by step: with a history longer than the run
// the amax only grows, and every scale is fp8_max / amax. One trajectory is no measure of it:
// tiny_transformer's gap at the default seed moved from 0.8 to 2.1 points with the BLAS kernels,
// their thread count, or AdamW's constants changing in their last bits; over seeds 1-4 it was
// +0.2 to -2.2 points a seed, 0.4 to 1.2 on average.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "kernels/allocator.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/trainer.h"

namespace mpbench {
namespace {

// The config, and the tensors its series hold: tiny_mlp's one FP8 layer (its head is pinned to
// fp32), tiny_transformer's first (layer1.qkv) and last (head).
struct Fp8Case {
  const char* config;
  size_t tensors;
  const char* first;
  const char* last;
};

class Fp8Training : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(Fp8Training, WithinOneAndAHalfPointsOfBf16AndTheScalesFollowTheAmax) {
  const Fp8Case& c = GetParam();
#ifdef MPBENCH_TEST_ASAN
  // 75 s under ASan; the transformer's FP8 path still runs there in test_training_series.
  if (std::string(c.config) != "tiny_mlp") GTEST_SKIP() << "the transformer: the Release build";
#endif
  const Spec spec = load_spec(test::source_dir() + "/configs/" + c.config + ".json");
  auto be = make_reference_backend();
  const Dataset data = make_dataset(spec);
  constexpr int kSeeds = 4;
  double bf16_mean = 0, fp8_mean = 0;
  std::string each;
  RunResult fp8;  // seed 1's, whose series are checked below
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    TrainOptions o;
    o.seed = seed;
    const RunResult bf16 = train_and_measure(spec, data, Precision::AMP_BF16, *be, o);
    RunResult f = train_and_measure(spec, data, Precision::AMP_FP8, *be, o);
    ASSERT_EQ(bf16.status, RunStatus::Ok) << bf16.status_detail;
    ASSERT_EQ(f.status, RunStatus::Ok) << f.status_detail;
    bf16_mean += bf16.final_accuracy / kSeeds;
    fp8_mean += f.final_accuracy / kSeeds;
    each += " seed " + std::to_string(seed) + ": " + std::to_string(f.final_accuracy) + " vs " +
            std::to_string(bf16.final_accuracy) + ";";
    EXPECT_EQ(f.skipped_steps, 0);
    EXPECT_FALSE(f.loss_scaling);
    EXPECT_TRUE(bf16.fp8_scaling.empty());
    if (seed == 1) fp8 = std::move(f);
  }
  EXPECT_GE(fp8_mean, bf16_mean - 0.015)
      << "amp_fp8 " << fp8_mean << ", amp_bf16 " << bf16_mean << " on average;" << each;

  // The first and the last FP8 layer's x, w (e4m3) and dy (e5m2).
  ASSERT_EQ(fp8.fp8_scaling.size(), c.tensors);
  EXPECT_EQ(fp8.fp8_scaling.front().tensor, c.first);
  EXPECT_EQ(fp8.fp8_scaling.back().tensor, c.last);
  for (const Fp8TensorSeries& t : fp8.fp8_scaling) {
    SCOPED_TRACE(t.tensor);
    const bool grad = t.tensor.size() > 3 && t.tensor.substr(t.tensor.size() - 3) == ".dy";
    EXPECT_EQ(t.format, grad ? "fp8_e5m2" : "fp8_e4m3");
    ASSERT_EQ(t.amax.size(), fp8.steps.size());
    ASSERT_EQ(t.scale.size(), fp8.steps.size());
    ASSERT_LT(fp8.steps.size(), static_cast<size_t>(spec.fp8.amax_history_len));
    const float fmax = grad ? kE5M2Max : kE4M3Max;
    EXPECT_EQ(t.clipped_steps, fp8_clipped_steps(t, false));
    for (size_t i = 0; i < t.amax.size(); ++i) {
      ASSERT_GT(t.amax[i], 0.0f) << "step " << i;
      if (i > 0) EXPECT_GE(t.amax[i], t.amax[i - 1]) << "step " << i;
      EXPECT_EQ(t.scale[i], fmax / t.amax[i]) << "step " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Configs, Fp8Training,
                         ::testing::Values(Fp8Case{"tiny_mlp", 3, "fc1.x", "fc1.dy"},
                                           Fp8Case{"tiny_transformer", 6, "layer1.qkv.x",
                                                   "head.dy"}),
                         [](const auto& info) { return std::string(info.param.config); });

// most_recent with a margin: each scale is fp8_max / 2^margin over that step's own amax.
TEST(Fp8Training, MostRecentAndMarginFromTheSpec) {
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  spec.train.epochs = 1;
  spec.fp8.amax_compute = AmaxCompute::MostRecent;
  spec.fp8.amax_history_len = 4;
  spec.fp8.margin = 3;
  auto be = make_reference_backend();
  const RunResult r = train_and_measure(spec, make_dataset(spec), Precision::AMP_FP8, *be);
  ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
  ASSERT_FALSE(r.fp8_scaling.empty());
  const Fp8TensorSeries& x = r.fp8_scaling.front();
  bool fell = false;
  for (size_t i = 0; i < x.amax.size(); ++i) {
    EXPECT_EQ(x.scale[i], kE4M3Max / 8.0f / x.amax[i]) << "step " << i;
    if (i > 0 && x.amax[i] < x.amax[i - 1]) fell = true;
  }
  EXPECT_TRUE(fell) << "most_recent follows each step's amax down as well as up";
}

// The FP8 copies a Linear holds only while its GEMMs run (x for the forward, dY and dY^T for the
// backward) are one set for the model, as the README says of such buffers; only x^T, kept for
// dW, is each layer's own. Each layer held all four (a BERT layer's amp_fp8 run took 22 MB more).
TEST(Fp8Training, TransientCopiesAreOneSetForTheModel) {
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  auto& mlp = std::get<MlpSpec>(spec.model);
  mlp.hidden = {96, 32, 64};  // FP8 layers 64->96, 96->32, 32->64; the head is pinned
  auto be = make_reference_backend();
  const auto activations = [&](Precision p) {
    return predict_training_memory(spec, p, *be)
        .by_category[static_cast<int>(MemCategory::Activations)];
  };
  const int64_t batch = spec.train.batch_size;
  // One byte an element: each layer's x^T, then one x-or-dY (the widest of any layer's in and
  // out) and one dY^T (the widest out).
  const int64_t kept = batch * (64 + 96 + 32), rows = batch * 96, cols = batch * 96;
  EXPECT_EQ(activations(Precision::AMP_FP8) - activations(Precision::AMP_BF16),
            static_cast<size_t>(kept + rows + cols));
  const RunResult r = train_and_measure(spec, make_dataset(spec), Precision::AMP_FP8, *be);
  ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
  EXPECT_EQ(r.memory.by_category[static_cast<int>(MemCategory::Activations)],
            activations(Precision::AMP_FP8));
}

// Evaluation casts to FP8 with the training's scales but records no amax: the scaling follows
// the training steps alone (Transformer Engine's fp8_autocast records only in training).
TEST(Fp8Training, EvaluationLeavesTheScalingHistoryAlone) {
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  Model model(spec, Precision::AMP_FP8);
  const int64_t batch = spec.train.batch_size;
  model.allocate(alloc, *be, batch, 1);
  const int64_t dim = model.io().input_dim;
  std::vector<float> xs(static_cast<size_t>(batch * dim), 0.5f);
  Tensor x = alloc.alloc(Shape{batch, dim}, DType::F32, MemCategory::Data);
  be->upload(xs.data(), x);
  model.set_training(false);
  model.forward(*be, x);
  ASSERT_FALSE(model.params().fp8().empty());
  for (const Fp8Scaling::Group& g : model.params().fp8().groups()) {
    if (!g.history.defined()) continue;
    std::vector<float> h(static_cast<size_t>(g.history.numel()));
    be->download(g.history, h.data());
    for (float v : h) EXPECT_EQ(v, 0.0f);
  }
}

}  // namespace
}  // namespace mpbench
