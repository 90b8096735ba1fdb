// Training is bit-identical step by step: every tiny config in every mode, an fp16 run whose
// loss scale overflows (skips and backoffs), and amp_fp8 with its FP8 scales, trained by the real
// executable on the CPU, must give exactly the loss, gradient norm, loss scale and skip of each
// step recorded in tests/data/training_series.json, and the same final loss and accuracy. A
// refactor of the ops, the models or the trainer that changes one rounding anywhere fails here.
//
// The CPU results depend, in the last digits, on OpenBLAS's kernels and threads: the runs pin the
// Haswell kernels (any AVX2 CPU has them) and one thread, as the recording did. On a CPU without
// AVX2 OpenBLAS ignores the pin, and the test skips.
//
// To record after a change that is meant to change numerics: MPBENCH_RECORD_SERIES=1 ctest -R
// TrainingSeries, and say why in the commit.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kPinnedCore = "Haswell";

struct Case {
  std::string name;            // key in the recording
  std::string config;          // configs/<config>.json
  double loss_scale_init = 0;  // 0: the config's own
  std::string precisions = mpbench::test::kTrainingSeriesModes;
};

const Case kCases[] = {
    {"tiny_mlp", "tiny_mlp"},
    {"tiny_resnet", "tiny_resnet"},
    {"tiny_transformer", "tiny_transformer"},
    {"tiny_resnet_stem", "tiny_resnet_stem"},
    {"tiny_gpt", "tiny_gpt"},
    // 2^40: fp16 gradients overflow, so the first steps are skipped and the scale backs off.
    {"tiny_mlp_overflow", "tiny_mlp", 1099511627776.0, "amp_fp16"},
    // amp_fp8 (only when listed): its casts, FP8 GEMMs and delayed scaling, with the scales.
    {"tiny_mlp_fp8", "tiny_mlp", 0, "amp_fp8"},
    {"tiny_transformer_fp8", "tiny_transformer", 0, "amp_fp8"},
};

fs::path recording_path() {
  return fs::path(mpbench::test::source_dir()) / "tests/data/training_series.json";
}

// What is compared of one run: per mode, the step series and the final figures.
json series_of(const json& results) {
  json out = json::object();
  for (const auto& r : results.at("runs")) {
    const json& s = r.at("steps");
    out[r.at("precision").get<std::string>()] = {{"loss", s.at("loss")},
                                                 {"grad_norm", s.at("grad_norm")},
                                                 {"loss_scale", s.at("loss_scale")},
                                                 {"skipped", s.at("skipped")},
                                                 {"final_loss", r.at("final_loss")},
                                                 {"final_accuracy", r.at("final_accuracy")}};
    // amp_fp8: every recorded tensor's scale per step, the delayed scaling's whole trajectory.
    if (r.contains("fp8_scaling"))
      for (const auto& t : r.at("fp8_scaling"))
        out[r.at("precision").get<std::string>()]["scale " + t.at("tensor").get<std::string>()] =
            t.at("scale");
  }
  return out;
}

class TrainingSeries : public mpbench::test::CliTest {
 protected:
  // Trains one case for one epoch in every mode; the parsed result file.
  json train(const Case& c) {
    std::string spec = mpbench::test::source_dir() + "/configs/" + c.config + ".json";
    if (c.loss_scale_init > 0) {
      json j = json::parse(mpbench::test::read_file(spec));
      j["loss_scale"]["init"] = c.loss_scale_init;
      spec = write(c.name + ".json", j.dump());
    }
    const auto r = mpbench::test::run_shell(
        std::string("OPENBLAS_CORETYPE=") + kPinnedCore + " OPENBLAS_NUM_THREADS=1 " + MPBENCH_EXE +
            " run --device reference " + spec + " --epochs 1 --precisions " + c.precisions +
            " --quiet --json " + (dir_ / "out.json").string(),
        dir_.string());
    EXPECT_EQ(r.code, 0) << r.err;
    return json::parse(mpbench::test::read_file(dir_ / "out.json"));
  }
};

TEST_F(TrainingSeries, EveryTinyConfigInEveryModeMatchesTheRecording) {
  const bool record = std::getenv("MPBENCH_RECORD_SERIES") != nullptr;
  json recorded;
  if (!record) {
    const std::string text = mpbench::test::read_file(recording_path());
    ASSERT_FALSE(text.empty()) << "cannot read " << recording_path();
    recorded = json::parse(text);
  }
  json got = json::object();
  for (const Case& c : kCases) {
    const json results = train(c);
    ASSERT_FALSE(HasFailure()) << c.name;
    const std::string core = results.at("env").at("cpu").at("blas_core").get<std::string>();
    if (core != kPinnedCore)
      GTEST_SKIP() << "OpenBLAS runs its " << core << " kernels here, not the pinned "
                   << kPinnedCore << " ones (no AVX2?): the recording does not apply";
    got[c.name] = series_of(results);
    ASSERT_EQ(got[c.name].size(), std::count(c.precisions.begin(), c.precisions.end(), ',') + 1u)
        << c.name << ": not every mode ran";
  }
  if (record) {
    fs::create_directories(recording_path().parent_path());
    std::ofstream(recording_path()) << got.dump(1) << "\n";
    GTEST_SKIP() << "recorded " << recording_path();
  }
  for (const auto& [name, modes] : recorded.items()) {
    ASSERT_TRUE(got.contains(name)) << name << " is recorded but no longer run";
    for (const auto& [mode, want] : modes.items()) {
      ASSERT_TRUE(got[name].contains(mode)) << name << " " << mode;
      const json& have = got[name][mode];
      for (const auto& [key, value] : want.items()) {
        if (!value.is_array()) {
          EXPECT_EQ(have.at(key), value) << name << " " << mode << " " << key;
          continue;
        }
        ASSERT_EQ(have.at(key).size(), value.size()) << name << " " << mode << " " << key;
        for (size_t i = 0; i < value.size(); ++i) {
          if (have.at(key)[i] == value[i]) continue;
          ADD_FAILURE() << name << " " << mode << ": " << key << " of step " << i << " is "
                        << have.at(key)[i] << ", recorded " << value[i];
          break;  // the first divergent step; the later ones follow from it
        }
      }
    }
  }
  EXPECT_EQ(got.size(), recorded.size());
}

}  // namespace
