// `mpbench data` run as a process: the exported arrays have the sizes the index promises, labels
// are in range, the export is deterministic, and bad input is exit code 2.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/spec.h"
#include "test_util.h"
#include "train/trainer.h"

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

// --params: the initial fp32 weights, named, shaped and placed in the index (tiny_mlp: fc1 and
// head, PyTorch's Linear init U(+-1/sqrt(in))); without it, neither the file nor the key.
TEST_F(DataExport, ParamsAreTheNamedInitialWeights) {
  std::string err;
  ASSERT_EQ(run("data " + tiny() + " --quiet --params --out " + (dir_ / "p").string(), &err), 0)
      << err;
  const auto idx = nlohmann::json::parse(read_file((dir_ / "p.json").string()));
  const auto& params = idx["params"];
  EXPECT_EQ(params["file"], "p.params.f32");
  const std::vector<std::pair<std::string, std::vector<int64_t>>> want = {
      {"fc1.weight", {32, 64}}, {"fc1.bias", {32}}, {"head.weight", {4, 32}}, {"head.bias", {4}}};
  ASSERT_EQ(params["tensors"].size(), want.size());
  int64_t end = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& t = params["tensors"][i];
    EXPECT_EQ(t["name"], want[i].first);
    EXPECT_EQ(t["shape"].get<std::vector<int64_t>>(), want[i].second);
    EXPECT_GE(t["offset"].get<int64_t>(), end);  // in order, none overlapping
    int64_t n = 1;
    for (int64_t d : want[i].second) n *= d;
    end = t["offset"].get<int64_t>() + n;
  }
  const std::string bytes = read_file((dir_ / "p.params.f32").string());
  ASSERT_EQ(static_cast<int64_t>(bytes.size()), end * 4);
  std::vector<float> v(static_cast<size_t>(end));
  std::memcpy(v.data(), bytes.data(), bytes.size());
  const int64_t w = params["tensors"][0]["offset"].get<int64_t>();
  float most = 0.0f;
  for (int64_t i = w; i < w + 32 * 64; ++i) most = std::max(most, std::abs(v[i]));
  EXPECT_GT(most, 0.1f);    // drawn, not zeros
  EXPECT_LE(most, 0.125f);  // 1 / sqrt(64)
  ASSERT_EQ(run("data " + tiny() + " --quiet --out " + (dir_ / "q").string(), &err), 0) << err;
  EXPECT_FALSE(nlohmann::json::parse(read_file((dir_ / "q.json").string())).contains("params"));
  EXPECT_FALSE(fs::exists(dir_ / "q.params.f32"));
}

// The index is a JSON file mpbench writes: the common header first (kind "data"), beside the
// index's own keys, which scripts/pytorch_reference.py reads.
TEST_F(DataExport, TheIndexHasTheCommonHeader) {
  std::string err;
  ASSERT_EQ(run("data " + tiny() + " --quiet --out " + (dir_ / "h").string(), &err), 0) << err;
  const auto idx = nlohmann::json::parse(read_file((dir_ / "h.json").string()));
  EXPECT_EQ(idx.value("schema_version", 0), 1);
  EXPECT_EQ(idx.value("kind", ""), "data");
  ASSERT_TRUE(idx.contains("tool"));
  EXPECT_EQ(idx["tool"].value("name", ""), "mpbench");
  ASSERT_TRUE(idx.contains("provenance"));
  EXPECT_FALSE(idx["provenance"].value("time_utc", "").empty());
  EXPECT_TRUE(idx["provenance"]["command"].is_array());
  for (const char* key : {"spec", "spec_file", "resolved_spec", "sample_dim", "num_classes",
                          "train_size", "eval_size", "description", "x_dtype", "y_dtype",
                          "labels_per_sample", "byte_order", "layout", "files"})
    EXPECT_TRUE(idx.contains(key)) << key;
  EXPECT_EQ(idx["spec"], "tiny_mlp");
  // Not a result file: report names its kind instead of reading it as a run.
  const auto r = CliTest::run("report " + (dir_ / "h.json").string() + " --html " +
                              (dir_ / "h.html").string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("data"), std::string::npos) << r.err;
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
  // Its suggestion joins the directory and the spec's name with one slash, "out/" as "out".
  EXPECT_EQ(run("data " + tiny() + " --out " + dir_.string() + "/", &err), 2);
  EXPECT_NE(err.find("such as " + dir_.string() + "/tiny_mlp)"), std::string::npos) << err;
  EXPECT_EQ(run("data " + tiny(), &err), 2);  // --out missing

  // An idx spec whose files are missing is refused naming the spec, as run refuses it.
  const fs::path idx = dir_ / "idx.json";
  std::ofstream(idx) << R"({"name": "i", "model": {"type": "mlp", "input_dim": 4, "hidden": [2],
    "num_classes": 2}, "data": {"type": "idx", "train_images": "nope", "train_labels": "nope",
    "eval_images": "nope", "eval_labels": "nope", "train_samples": 8, "eval_samples": 2},
    "train": {"batch_size": 4}})";
  EXPECT_EQ(run("data " + idx.string() + " --out " + (dir_ / "i").string(), &err), 2);
  EXPECT_NE(err.find(idx.string() + ": data.train_images: "), std::string::npos) << err;
}

// --seed 0 is a seed like any other, not "the spec's": the index says 0 and the arrays are not
// seed 1's.
TEST_F(DataExport, SeedZeroIsTaken) {
  ASSERT_EQ(run("data " + tiny() + " --quiet --seed 0 --out " + (dir_ / "z").string()), 0);
  ASSERT_EQ(run("data " + tiny() + " --quiet --seed 1 --out " + (dir_ / "o").string()), 0);
  const auto z = nlohmann::json::parse(read_file((dir_ / "z.json").string()));
  EXPECT_EQ(z["resolved_spec"]["data"]["seed"], 0);
  EXPECT_NE(read_file((dir_ / "z.train_x.f32").string()),
            read_file((dir_ / "o.train_x.f32").string()));
}

// The index names its files relative to itself (a prefix's directory would break a moved
// dataset), and the parameters' seed is the one `run` starts from, not the data's.
TEST_F(DataExport, TheIndexNamesFilesBesideItAndRunsInitSeed) {
  std::string err;
  ASSERT_EQ(run("data " + tiny() + " --quiet --params --out " + (dir_ / "x").string(), &err), 0)
      << err;
  const auto idx = nlohmann::json::parse(read_file((dir_ / "x.json").string()));
  EXPECT_EQ(idx["files"]["train_x"], "x.train_x.f32");
  EXPECT_EQ(idx["params"]["init_seed"].get<uint64_t>(),
            mpbench::init_seed_for(mpbench::load_spec(tiny()), std::nullopt));
}

// Every output is checked against every input before anything is written: the --params file
// onto the spec, and an array onto one of an idx spec's data files, are refused and leave them
// as they were.
TEST_F(DataExport, NoOutputWritesOverAnInput) {
  const std::string text = read_file(tiny());
  const std::string spec = write("d.params.f32", text);
  expect_refused(CliTest::run("data " + spec + " --quiet --params --out " + (dir_ / "d").string()),
                 "is the input");
  EXPECT_TRUE(read_file(spec) == text) << "the spec was written over";

  auto be32 = [](std::string& s, uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>(v >> shift));
  };
  std::string images, labels;
  for (uint32_t v : {0x803u, 8u, 2u, 2u}) be32(images, v);
  images.append(8 * 2 * 2, '\x10');
  for (uint32_t v : {0x801u, 8u}) be32(labels, v);
  labels.append(8, '\x01');
  write("ti", images);
  const std::string tl = write("x.train_y.i32", labels);
  const std::string idx = write("idx.json", R"({"name": "i", "model": {"type": "mlp",
      "input_dim": 4, "hidden": [2], "num_classes": 2}, "data": {"type": "idx",
      "train_images": "ti", "train_labels": "x.train_y.i32", "eval_images": "ti",
      "eval_labels": "x.train_y.i32", "train_samples": 8, "eval_samples": 8},
      "train": {"batch_size": 4}})");
  expect_refused(CliTest::run("data " + idx + " --quiet --out " + (dir_ / "x").string()),
                 "is the input");
  EXPECT_TRUE(read_file(tl) == labels) << "the labels were written over";
}

// '-' is not stdout for `data` either (it writes several files): refused, and no "-.json",
// "-.train_x.f32" ... made in the working directory.
TEST_F(DataExport, DashIsNotAPrefix) {
  const auto r = mpbench::test::run_shell(
      "cd " + dir_.string() + " && " + MPBENCH_EXE + " data " + tiny() + " --out -", dir_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("--out -: '-' is not taken for stdout"), std::string::npos) << r.err;
  for (const auto& f : fs::directory_iterator(dir_))
    EXPECT_NE(f.path().filename().string().rfind('-', 0), 0u) << f.path();
}

// `mpbench data` started directly (no shell, so that its pid is the one in its temporary names),
// stdout and stderr to /dev/null.
pid_t spawn_data(const std::string& spec, const std::string& seed, const std::string& prefix) {
  const pid_t pid = fork();
  if (pid == 0) {
    const int null = open("/dev/null", O_WRONLY);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
    execl(MPBENCH_EXE, MPBENCH_EXE, "data", spec.c_str(), "--quiet", "--seed", seed.c_str(),
          "--out", prefix.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

// Waits until the export `pid` starts writing (its first temporary file appears); false when it
// ended first (then it is reaped, and its pid must not be signalled).
bool wait_for_writing(pid_t pid, const std::string& prefix, int* status) {
  const std::string tmp = prefix + ".train_x.f32.tmp." + std::to_string(pid);
  while (!fs::exists(tmp)) {
    if (waitpid(pid, status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return true;
}

// An array whose output is a device that fails (a link to /dev/full) fails the re-export before
// the old index goes: the dataset that was there keeps its index, and the link stays a link.
TEST_F(DataExport, AFailedDeviceArrayKeepsTheOldIndex) {
  const std::string prefix = (dir_ / "p").string();
  ASSERT_EQ(run("data " + tiny() + " --quiet --out " + prefix), 0);
  const std::string index = read_file(prefix + ".json");
  fs::remove(prefix + ".eval_y.i32");
  fs::create_symlink("/dev/full", prefix + ".eval_y.i32");
  std::string err;
  EXPECT_EQ(run("data " + tiny() + " --quiet --seed 9 --out " + prefix, &err), 3) << err;
  EXPECT_NE(err.find("No space left on device"), std::string::npos) << err;
  ASSERT_TRUE(fs::exists(prefix + ".json"));
  EXPECT_EQ(read_file(prefix + ".json"), index);
  EXPECT_TRUE(fs::is_symlink(prefix + ".eval_y.i32"));
}

// A re-export to one prefix killed with SIGKILL (no cleanup at all) at random moments of its
// writing, alternating between two seeds: whenever there is an index, every array it names is
// the one of the index's own seed. The old index beside new arrays (of another seed, same sizes)
// is what a reader cannot tell from a real dataset.
TEST_F(DataExport, AKilledReExportNeverLeavesAMixedDataset) {
  // 150000 x 64 floats: 38 MB of train_x, so that the writing takes a while.
  const std::string spec = write("big.json", R"({"name": "big", "model": {"type": "mlp",
    "input_dim": 64, "hidden": [8], "num_classes": 4}, "data": {"train_samples": 150000,
    "eval_samples": 4096}, "train": {"batch_size": 64, "epochs": 1}})");
  const char* keys[] = {"train_x", "train_y", "eval_x", "eval_y"};
  std::map<int, std::map<std::string, std::string>> ref;  // seed -> array -> bytes
  double writing_s = 0;  // from the first temporary file to the end, the longer of two exports
  for (int seed : {1, 2}) {
    const std::string prefix = (dir_ / ("ref" + std::to_string(seed))).string();
    const pid_t pid = spawn_data(spec, std::to_string(seed), prefix);
    int status = 0;
    const bool caught = wait_for_writing(pid, prefix, &status);
    const auto t0 = std::chrono::steady_clock::now();
    if (caught) waitpid(pid, &status, 0);
    writing_s = std::max(
        writing_s, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    const auto idx = nlohmann::json::parse(read_file(prefix + ".json"));
    for (const char* k : keys)
      ref[seed][k] = read_file((dir_ / idx["files"][k].get<std::string>()).string());
  }
  ASSERT_NE(ref[1]["train_x"], ref[2]["train_x"]);

  const std::string prefix = (dir_ / "d").string();
  ASSERT_EQ(run("data " + spec + " --quiet --seed 2 --out " + prefix), 0);
  std::mt19937 rng(25);
  std::uniform_int_distribution<int> delay_us(0, static_cast<int>(writing_s * 1e6));
  std::map<std::string, int> found;  // what the kills left: an index of either seed, or none
  for (int i = 0; i < 10; ++i) {
    const std::string seed = std::to_string(1 + i % 2);
    const pid_t pid = spawn_data(spec, seed, prefix);
    int status = 0;
    if (wait_for_writing(pid, prefix, &status)) {
      std::this_thread::sleep_for(std::chrono::microseconds(delay_us(rng)));
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }

    // The reader: goes by the index, checks what it names.
    if (!fs::exists(prefix + ".json")) {
      ++found["no index"];
      continue;
    }
    const auto idx = nlohmann::json::parse(read_file(prefix + ".json"));
    const int idx_seed = idx["resolved_spec"]["data"]["seed"];
    ++found[idx_seed == std::stoi(seed) ? "the new index" : "the old index"];
    for (const char* k : keys) {
      const std::string got = read_file((dir_ / idx["files"][k].get<std::string>()).string());
      EXPECT_TRUE(got == ref[idx_seed][k])
          << "kill " << i << ": the index of seed " << idx_seed << " names a " << k << " of "
          << got.size() << " bytes that is not that seed's";
    }
  }
  // Not asserted (timing), but the log says which states the kills found.
  std::cout << "killed re-exports left:";
  for (const auto& [what, n] : found) std::cout << " " << what << " " << n << ";";
  std::cout << "\n";

  // A complete export after all that: the dataset of its seed.
  ASSERT_EQ(run("data " + spec + " --quiet --seed 1 --out " + prefix), 0);
  const auto idx = nlohmann::json::parse(read_file(prefix + ".json"));
  for (const char* k : keys)
    EXPECT_TRUE(read_file((dir_ / idx["files"][k].get<std::string>()).string()) == ref[1][k]) << k;
}

}  // namespace
