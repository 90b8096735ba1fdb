// `mpbench profile` on the GPU: the OpProfiler's CUDA events around every op leave the training
// itself alone (the MLP's eager steps are reproducible on the GPU, so the losses must agree with
// and without it), every layer is seen in both scopes, and the ops' device time fits inside the
// steps the trainer timed with its own events.
#include <set>

#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/op_profile.h"
#include "train/trainer.h"

using namespace mpbench;

TEST(OpProfilerGpu, TimesEveryOpWithoutChangingTheRun) {
  std::string why;
  if (cuda_device_count(&why) == 0) GTEST_SKIP() << why;
  Spec spec = load_spec(test::source_dir() + "/configs/tiny_mlp.json");
  spec.train.epochs = 1;
  spec.train.warmup_steps = 2;
  spec.data.train_samples = 8 * spec.train.batch_size;
  Dataset data = make_dataset(spec);
  auto gpu = make_cuda_backend(0);
  RunResult plain = train_and_measure(spec, data, Precision::AMP_BF16, *gpu);
  ASSERT_EQ(plain.status, RunStatus::Ok) << plain.status_detail;

  ProfiledRun prof = profile_training(spec, data, Precision::AMP_BF16, 8, *gpu);
  const RunResult& profiled = prof.run;
  ASSERT_EQ(profiled.status, RunStatus::Ok) << profiled.status_detail;
  EXPECT_EQ(prof.steps, 8);
  ASSERT_EQ(plain.steps.size(), profiled.steps.size());
  // Bit for bit: the loss is summed in a fixed order (softmax_xent.cu) and the GEMM plans are
  // cached per backend, so both runs compute the same thing the same way.
  for (size_t i = 0; i < plain.steps.size(); ++i)
    EXPECT_EQ(plain.steps[i].loss, profiled.steps[i].loss) << "step " << i;
  EXPECT_EQ(plain.final_accuracy, profiled.final_accuracy);

  const std::vector<OpTotal>& ops = prof.ops;
  std::set<std::string> scopes;
  double op_ms = 0;
  int64_t calls = 0;
  for (const OpTotal& o : ops) {
    scopes.insert(o.scope);
    EXPECT_GT(o.calls, 0) << o.scope << " " << o.op;
    EXPECT_GE(o.ms, 0.0) << o.scope << " " << o.op;
    op_ms += o.ms;
    calls += o.calls;
  }
  for (const std::string& l : Model(spec, Precision::AMP_BF16).layer_names()) {
    EXPECT_TRUE(scopes.count(l + " fwd")) << l;
    EXPECT_TRUE(scopes.count(l + " bwd")) << l;
  }
  // The profiled steps are the 8 of the epoch; their ops run one after another inside the events
  // the trainer put between steps, so together they take no longer than those steps, give or
  // take the events' resolution (about half a microsecond each; 1 us per op allowed).
  double step_ms = 0;
  for (size_t i = 2; i < profiled.steps.size(); ++i) step_ms += profiled.steps[i].time_ms;
  EXPECT_GT(op_ms, 0.0);
  EXPECT_LE(op_ms, step_ms + 1e-3 * static_cast<double>(calls))
      << "ops " << op_ms << " ms (" << calls << " calls), steps " << step_ms << " ms";
}
