// The memory prediction (predict_training_memory, as `inspect` prints it and the run JSON carries
// it) against what training really took: every shipped config, in fp32 and amp_bf16, at a small
// batch on the CPU. The prediction counts the trainer's own allocations, so it must match each
// category of the tracked peak; the bar is 5% of the training peak.
#include <filesystem>

#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/max_batch.h"
#include "train/trainer.h"

using namespace mpbench;
namespace fs = std::filesystem;

TEST(MemoryPrediction, EveryShippedConfigAtASmallBatch) {
  auto be = make_cpu_backend();
  int configs = 0;
  for (const auto& entry : fs::directory_iterator(test::source_dir() + "/configs")) {
    if (entry.path().extension() != ".json") continue;
    ++configs;
    const Spec spec = load_spec(entry.path().string());
    for (Precision p : {Precision::FP32, Precision::AMP_BF16}) {
      SCOPED_TRACE(spec.name + " " + precision_name(p));
      // Batch 2 (one image per batchnorm channel would be too few values for a 1x1 image).
      const Spec s = probe_spec(spec, p, 2, 1);
      const Dataset data = make_dataset(s);
      const RunResult r = train_and_measure(s, data, p, *be);
      ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
      ASSERT_TRUE(r.has_predicted_memory);
      const double measured = static_cast<double>(r.memory.training_peak);
      const double predicted = static_cast<double>(r.predicted_memory.training_peak);
      EXPECT_GT(measured, 0);
      EXPECT_NEAR(predicted, measured, 0.05 * measured);
      for (int c = 0; c < kMemCategoryCount; ++c) {
        if (static_cast<MemCategory>(c) == MemCategory::Data) continue;
        EXPECT_EQ(r.predicted_memory.by_category[c], r.memory.by_category[c])
            << mem_category_name(static_cast<MemCategory>(c));
      }
    }
  }
  EXPECT_GE(configs, 11);
}
