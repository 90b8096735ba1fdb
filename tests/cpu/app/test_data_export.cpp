// `mpbench data` run as a process: the exported arrays have the sizes the index promises, labels
// are in range, the export is deterministic, and bad input is exit code 2.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace fs = std::filesystem;

namespace {

using mpbench::test::read_file;

class DataExport : public mpbench::test::CliTest {
 protected:
  // Exit code; stderr into *err.
  int run(const std::string& args, std::string* err = nullptr) {
    auto r = CliTest::run(args);
    if (err) *err = r.err;
    return r.code;
  }
  std::string tiny() const { return std::string(MPBENCH_SOURCE_DIR) + "/configs/tiny_mlp.json"; }
};

TEST_F(DataExport, TinyMlpSizesAndLabels) {
  const fs::path prefix = dir_ / "tiny";
  std::string err;
  ASSERT_EQ(run("data " + tiny() + " --out " + prefix.string(), &err), 0) << err;

  auto idx = nlohmann::json::parse(read_file((dir_ / "tiny.json").string()));
  // configs/tiny_mlp.json: 64 inputs, 4 classes, 2048 train / 512 eval samples.
  EXPECT_EQ(idx["sample_dim"], 64);
  EXPECT_EQ(idx["num_classes"], 4);
  EXPECT_EQ(idx["train_size"], 2048);
  EXPECT_EQ(idx["eval_size"], 512);
  EXPECT_EQ(idx["x_dtype"], "float32");
  EXPECT_EQ(idx["y_dtype"], "int32");
  EXPECT_FALSE(idx["description"].get<std::string>().empty());

  struct Expect {
    const char* key;
    uintmax_t bytes;
  };
  for (Expect e : {Expect{"train_x", 2048u * 64 * 4}, Expect{"train_y", 2048u * 4},
                   Expect{"eval_x", 512u * 64 * 4}, Expect{"eval_y", 512u * 4}}) {
    fs::path f = dir_ / idx["files"][e.key].get<std::string>();
    ASSERT_TRUE(fs::exists(f)) << f;
    EXPECT_EQ(fs::file_size(f), e.bytes) << e.key;
  }

  for (const char* key : {"train_y", "eval_y"}) {
    std::string raw = read_file((dir_ / idx["files"][key].get<std::string>()).string());
    std::vector<int32_t> y(raw.size() / 4);
    std::memcpy(y.data(), raw.data(), raw.size());
    std::vector<int> count(4, 0);
    for (int32_t v : y) {
      ASSERT_GE(v, 0) << key;
      ASSERT_LT(v, 4) << key;
      ++count[v];
    }
    // Classes are drawn uniformly: each of the 4 must appear.
    for (int c = 0; c < 4; ++c) EXPECT_GT(count[c], 0) << key << " class " << c;
  }

  std::string raw = read_file((dir_ / "tiny.train_x.f32").string());
  std::vector<float> x(raw.size() / 4);
  std::memcpy(x.data(), raw.data(), raw.size());
  double sum_sq = 0;
  for (float v : x) {
    ASSERT_TRUE(std::isfinite(v));
    sum_sq += double(v) * v;
  }
  // Unit variance per input coordinate by construction (dataset.h).
  EXPECT_NEAR(sum_sq / x.size(), 1.0, 0.1);
}

TEST_F(DataExport, DeterministicAndSeedOverride) {
  ASSERT_EQ(run("data " + tiny() + " --out " + (dir_ / "a").string()), 0);
  ASSERT_EQ(run("data " + tiny() + " --out " + (dir_ / "b").string()), 0);
  ASSERT_EQ(run("data " + tiny() + " --seed 8 --out " + (dir_ / "c").string()), 0);
  EXPECT_EQ(read_file((dir_ / "a.train_x.f32").string()),
            read_file((dir_ / "b.train_x.f32").string()));
  EXPECT_EQ(read_file((dir_ / "a.eval_y.i32").string()),
            read_file((dir_ / "b.eval_y.i32").string()));
  EXPECT_NE(read_file((dir_ / "a.train_x.f32").string()),
            read_file((dir_ / "c.train_x.f32").string()));
  auto c = nlohmann::json::parse(read_file((dir_ / "c.json").string()));
  EXPECT_EQ(c["resolved_spec"]["data"]["seed"], 8);
  EXPECT_EQ(c["resolved_spec"]["name"], "tiny_mlp");
  EXPECT_EQ(c["resolved_spec"]["train"]["optimizer"]["beta2"], 0.999);  // a default, written out
}

TEST_F(DataExport, BadInputIsExitTwo) {
  std::string err;
  EXPECT_EQ(run("data " + tiny() + " --out " + (dir_ / "missing_dir" / "x").string(), &err), 2);
  EXPECT_NE(err.find("missing_dir"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "missing_dir"));

  EXPECT_EQ(run("data " + (dir_ / "no_such_spec.json").string() + " --out " + (dir_ / "x").string(),
                &err),
            2);
  EXPECT_NE(err.find("no_such_spec.json"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(dir_ / "x.json"));

  EXPECT_EQ(run("data " + tiny() + " --out " + dir_.string(), &err), 2);  // a directory
  EXPECT_EQ(run("data " + tiny(), &err), 2);                              // --out missing
}

}  // namespace
