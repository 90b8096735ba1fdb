// Datasets: the synthetic task is deterministic, balanced and unit-variance; idx files are read
// exactly and every malformed file is a one-line BadInput naming the file.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <thread>

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/error.h"
#include "kernels/host_memory.h"
#include "models/dataset.h"
#include "test_util.h"

namespace mpbench {
namespace {

namespace fs = std::filesystem;

TEST(Synthetic, SameSeedSameBytesOtherSeedOtherBytes) {
  const Dataset a = make_synthetic_mlp(32, 5, 300, 100, 7);
  const Dataset b = make_synthetic_mlp(32, 5, 300, 100, 7);
  const Dataset c = make_synthetic_mlp(32, 5, 300, 100, 8);
  ASSERT_EQ(a.train_x.size(), b.train_x.size());
  EXPECT_EQ(std::memcmp(a.train_x.data(), b.train_x.data(), a.train_x.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(a.eval_x.data(), b.eval_x.data(), a.eval_x.size() * sizeof(float)), 0);
  EXPECT_EQ(a.train_y, b.train_y);
  EXPECT_EQ(a.eval_y, b.eval_y);
  EXPECT_NE(std::memcmp(a.train_x.data(), c.train_x.data(), a.train_x.size() * sizeof(float)), 0);
  EXPECT_NE(a.train_y, c.train_y);
  // Train and eval are different draws of the same task.
  EXPECT_NE(std::memcmp(a.train_x.data(), a.eval_x.data(), a.eval_x.size() * sizeof(float)), 0);
  // A longer split starts with the same samples: the split sizes do not change the stream.
  const Dataset longer = make_synthetic_mlp(32, 5, 600, 100, 7);
  EXPECT_EQ(std::memcmp(a.train_x.data(), longer.train_x.data(), a.train_x.size() * sizeof(float)),
            0);
}

// Pinned values: the generator must give the same bytes on every platform and build, so that
// results files compare across machines. If this fails, the RNG or the task changed.
const char* const kPinned =
    "1064277872,3199808243,3215996609,1062957585,1066620235,1067055657,1065608113,1069883439,1;2;";
TEST(Synthetic, PinnedFirstValues) {
  const Dataset d = make_synthetic_mlp(4, 3, 2, 1, 1);
  const std::vector<float> x(d.train_x.begin(), d.train_x.end());
  std::vector<uint32_t> bits(x.size());
  std::memcpy(bits.data(), x.data(), x.size() * sizeof(float));
  std::string got;
  for (uint32_t b : bits) got += std::to_string(b) + ",";
  for (int32_t y : d.train_y) got += std::to_string(y) + ";";
  EXPECT_EQ(got, kPinned) << "new values: " << got;
}

TEST(Synthetic, ShapesLabelsBalanceAndScale) {
  const int classes = 10;
  const Dataset d = make_synthetic_mlp(784, classes, 20000, 2000, 1);
  EXPECT_EQ(d.sample_dim, 784);
  EXPECT_EQ(d.num_classes, classes);
  EXPECT_EQ(d.train_size(), 20000);
  EXPECT_EQ(d.eval_size(), 2000);
  EXPECT_EQ(d.train_x.size(), 20000u * 784);
  EXPECT_EQ(d.eval_x.size(), 2000u * 784);
  EXPECT_FALSE(d.description.empty());
  std::vector<int> count(classes, 0);
  for (int32_t y : d.train_y) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, classes);
    ++count[y];
  }
  for (int c = 0; c < classes; ++c) {
    EXPECT_GT(count[c], 2000 * 0.85) << "class " << c;
    EXPECT_LT(count[c], 2000 * 1.15) << "class " << c;
  }
  for (int32_t y : d.eval_y) ASSERT_TRUE(y >= 0 && y < classes);
  double sum = 0, sq = 0;
  for (float v : d.train_x) {
    ASSERT_TRUE(std::isfinite(v));
    sum += v;
    sq += double(v) * v;
  }
  const double n = static_cast<double>(d.train_x.size());
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sq / n, 1.0, 0.1);
}

// The task is learnable: class means estimated from the training split classify the eval split
// far better than chance (nearest prototype is near-Bayes); and not trivially: a single
// coordinate carries almost no information.
TEST(Synthetic, LearnableFromDataButNotFromOneCoordinate) {
  const int64_t dim = 256;
  const int classes = 4;
  SyntheticMlpTask task;
  task.subclusters = 1;  // one prototype per class: class means are the prototypes
  const Dataset d = make_synthetic_mlp(dim, classes, 4000, 1000, 3, task);
  std::vector<double> mean(classes * dim, 0.0);
  std::vector<int> n(classes, 0);
  for (int64_t i = 0; i < d.train_size(); ++i) {
    ++n[d.train_y[i]];
    for (int64_t j = 0; j < dim; ++j) mean[d.train_y[i] * dim + j] += d.train_x[i * dim + j];
  }
  for (int c = 0; c < classes; ++c) {
    for (int64_t j = 0; j < dim; ++j) mean[c * dim + j] /= n[c];
  }
  auto accuracy = [&](int64_t use_dims) {
    int correct = 0;
    for (int64_t i = 0; i < d.eval_size(); ++i) {
      int best = 0;
      double best_d = 1e300;
      for (int c = 0; c < classes; ++c) {
        double dist = 0;
        for (int64_t j = 0; j < use_dims; ++j) {
          const double diff = d.eval_x[i * dim + j] - mean[c * dim + j];
          dist += diff * diff;
        }
        if (dist < best_d) best_d = dist, best = c;
      }
      correct += best == d.eval_y[i];
    }
    return static_cast<double>(correct) / d.eval_size();
  };
  EXPECT_GT(accuracy(dim), 0.97);
  EXPECT_LT(accuracy(1), 0.45);
}

// Every family reports its generation on the calling thread, never backwards, ending at the
// total of both splits; reporting changes no byte (the images are made on several threads).
TEST(Synthetic, ProgressCountsEverySampleOnTheCallingThread) {
  for (const char* config : {"tiny_mlp", "tiny_resnet", "tiny_transformer"}) {
    SCOPED_TRACE(config);
    const Spec s = load_spec(test::source_dir() + "/configs/" + config + ".json");
    const int64_t total = s.data.train_samples + s.data.eval_samples;
    const auto caller = std::this_thread::get_id();
    int64_t last = -1, calls = 0;
    bool on_caller = true;
    const Dataset d = make_dataset(s, [&](int64_t done, int64_t all) {
      EXPECT_EQ(all, total);
      EXPECT_GE(done, last);
      EXPECT_LE(done, total);
      on_caller &= std::this_thread::get_id() == caller;
      last = done;
      ++calls;
    });
    EXPECT_TRUE(on_caller);
    EXPECT_EQ(last, total);
    EXPECT_GE(calls, 2);
    const Dataset plain = make_dataset(s);
    EXPECT_EQ(d.train_x, plain.train_x);
    EXPECT_EQ(d.train_tokens, plain.train_tokens);
    EXPECT_EQ(d.eval_y, plain.eval_y);
  }
}

// The dataset is checked against what the host can give before any of it is made: once where it
// is made, twice where the training device (the host) copies it (the address-space limit:
// tests/cpu/app/test_io_failures.cpp).
TEST(Synthetic, ADatasetMustFitTheHostBeforeItIsMade) {
  const HostMemory host = host_memory_left();
  if (host.bytes == SIZE_MAX) GTEST_SKIP() << "no host memory figure here";
  Spec s = parse_spec(
      R"({"name": "t", "model": {"type": "mlp", "input_dim": 999, "hidden": [8], "num_classes": 3},
          "data": {"train_samples": 100, "eval_samples": 1}, "train": {"batch_size": 10}})",
      "t.json");
  // 4 kB a sample (999 inputs and a label): 60% of what is left.
  s.data.train_samples = static_cast<int64_t>(0.6 * static_cast<double>(host.bytes) / 4000.0);
  EXPECT_NO_THROW(check_dataset_fits(s));
  try {
    check_dataset_fits(s, 2);
    ADD_FAILURE() << "twice 60% fitted";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_oom());
    EXPECT_NE(std::string(e.what()).find("the dataset and the training device's 1 copy of it"),
              std::string::npos)
        << e.what();
  }
}

// What the check counts: every sample of both splits, its inputs and its labels (a transformer's
// tokens and one label per position: 4 x (4096 + 512) x (16 + 16) bytes, 589,824), times the
// copies; here so many copies that no host holds them.
TEST(Synthetic, TheDatasetsBytesAreBothSplitsInputsAndLabels) {
  const HostMemory host = host_memory_left();
  if (host.bytes == SIZE_MAX) GTEST_SKIP() << "no host memory figure here";
  const Spec s = load_spec(test::source_dir() + "/configs/tiny_transformer.json");
  const int64_t bytes = 4 * (4096 + 512) * (16 + 16);
  const int copies = static_cast<int>(std::min<double>(2.0 * double(host.bytes) / bytes + 2, 2e9));
  try {
    check_dataset_fits(s, copies);
    ADD_FAILURE() << copies << " copies fitted";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_oom());
    EXPECT_NE(std::string(e.what()).find(" take " + std::to_string(bytes * copies) + " bytes"),
              std::string::npos)
        << e.what();
  }
}

TEST(Synthetic, MakeDatasetFollowsTheSpec) {
  const Spec s = parse_spec(
      R"({"name": "t", "model": {"type": "mlp", "input_dim": 12, "hidden": [8], "num_classes": 3},
          "data": {"train_samples": 100, "eval_samples": 40, "seed": 5},
          "train": {"batch_size": 10}})",
      "t.json");
  const Dataset d = make_dataset(s);
  EXPECT_EQ(d.sample_dim, 12);
  EXPECT_EQ(d.num_classes, 3);
  EXPECT_EQ(d.train_size(), 100);
  EXPECT_EQ(d.eval_size(), 40);
  const Dataset direct = make_synthetic_mlp(12, 3, 100, 40, 5);
  EXPECT_EQ(d.train_x, direct.train_x);
  EXPECT_EQ(d.eval_y, direct.eval_y);

  // Token data for the transformer family: int32 inputs and a label per position.
  const Spec t = parse_spec(R"({"name": "t", "model": {"type": "transformer", "d_model": 64,
      "heads": 4, "ffn_dim": 256, "seq_len": 32, "vocab_size": 100},
      "data": {"train_samples": 16, "eval_samples": 8}, "train": {"batch_size": 8}})",
                            "t.json");
  const Dataset ds = make_dataset(t);
  EXPECT_EQ(ds.input_dtype, DType::I32);
  EXPECT_EQ(ds.labels_per_sample, 32);
  EXPECT_EQ(ds.num_classes, 100);
  EXPECT_EQ(ds.train_size(), 16);
  EXPECT_EQ(ds.train_tokens.size(), 16u * 32);
  EXPECT_EQ(ds.eval_y.size(), 8u * 32);

  // idx files hold flat images for an MLP; the other families say so when the spec is read, not
  // when its data are made after other specs have trained.
  const char* idx_data = R"("data": {"type": "idx", "train_samples": 16, "eval_samples": 8,
      "train_images": "a", "train_labels": "b", "eval_images": "c", "eval_labels": "d"})";
  for (const std::string model :
       {R"({"type": "resnet_bottleneck", "image_size": 8, "in_channels": 4, "width": 8,
            "out_channels": 16, "blocks": 1, "num_classes": 4})",
        R"({"type": "transformer", "d_model": 64, "heads": 4, "ffn_dim": 256, "seq_len": 32,
            "vocab_size": 100})"}) {
    try {
      parse_spec(R"({"name": "r", "model": )" + model + ", " + idx_data +
                     R"(, "train": {"batch_size": 8}})",
                 "r.json");
      ADD_FAILURE() << "idx data must be refused for " << model;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      EXPECT_NE(std::string(e.what()).find("r.json: data.type"), std::string::npos) << e.what();
    }
  }
}

// ---- idx ----------------------------------------------------------------------------------

void put_be32(std::string& s, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) s.push_back(static_cast<char>((v >> shift) & 0xff));
}

std::string idx_images(uint32_t n, uint32_t rows, uint32_t cols, uint32_t magic = 0x803) {
  std::string s;
  put_be32(s, magic);
  put_be32(s, n);
  put_be32(s, rows);
  put_be32(s, cols);
  for (uint32_t i = 0; i < n * rows * cols; ++i) s.push_back(static_cast<char>((i * 7) % 256));
  return s;
}

std::string idx_labels(uint32_t n, int classes, uint32_t magic = 0x801) {
  std::string s;
  put_be32(s, magic);
  put_be32(s, n);
  for (uint32_t i = 0; i < n; ++i) s.push_back(static_cast<char>(i % classes));
  return s;
}

class Idx : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mpbench_idx_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    write("ti", idx_images(20, 3, 4));
    write("tl", idx_labels(20, 5));
    write("ei", idx_images(8, 3, 4));
    write("el", idx_labels(8, 5));
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream out(path(name), std::ios::binary);
    out << bytes;
  }
  DataSpec spec(int64_t n_train = 16, int64_t n_eval = 8) const {
    DataSpec d;
    d.type = "idx";
    d.train_samples = n_train;
    d.eval_samples = n_eval;
    d.train_images = path("ti");
    d.train_labels = path("tl");
    d.eval_images = path("ei");
    d.eval_labels = path("el");
    return d;
  }
  // The BadInput message of loading, "" if it loads. check_idx, which commands run on every spec
  // before any work, must refuse the same files with the same words, without the pixels.
  std::string error_of(const DataSpec& d, int64_t input_dim = 12, int classes = 5) const {
    std::string checked;
    try {
      check_idx(d, input_dim, classes);
    } catch (const Error& e) {
      checked = e.what();
    }
    try {
      load_idx(d, input_dim, classes);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::BadInput);
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
      EXPECT_EQ(checked, e.what()) << "check_idx and load_idx disagree";
      return e.what();
    }
    EXPECT_EQ(checked, "") << "check_idx refused what load_idx loads";
    return "";
  }
  void expect_error(const DataSpec& d, const std::string& fragment, int64_t input_dim = 12,
                    int classes = 5) const {
    const std::string msg = error_of(d, input_dim, classes);
    ASSERT_FALSE(msg.empty()) << "loaded without error; wanted " << fragment;
    EXPECT_NE(msg.find(fragment), std::string::npos) << msg << "\nwanted: " << fragment;
  }

  fs::path dir_;
};

TEST_F(Idx, GoodFilesLoadScaledAndInOrder) {
  const Dataset d = load_idx(spec(), 12, 5);
  EXPECT_EQ(d.sample_dim, 12);
  EXPECT_EQ(d.num_classes, 5);
  EXPECT_EQ(d.train_size(), 16);  // the first 16 of 20
  EXPECT_EQ(d.eval_size(), 8);
  ASSERT_EQ(d.train_x.size(), 16u * 12);
  for (size_t i = 0; i < d.train_x.size(); ++i) {
    ASSERT_FLOAT_EQ(d.train_x[i], static_cast<float>((i * 7) % 256) / 255.0f) << i;
  }
  for (int64_t i = 0; i < d.train_size(); ++i) EXPECT_EQ(d.train_y[i], i % 5);
  EXPECT_FLOAT_EQ(*std::max_element(d.train_x.begin(), d.train_x.end()), 1.0f);  // byte 255
  EXPECT_NE(d.description.find("idx"), std::string::npos);
}

TEST_F(Idx, MakeDatasetReadsIdxFromTheSpecDirectory) {
  const std::string text =
      R"({"name": "t", "model": {"type": "mlp", "input_dim": 12, "hidden": [4], "num_classes": 5},
          "data": {"type": "idx", "train_samples": 20, "eval_samples": 8, "train_images": "ti",
                   "train_labels": "tl", "eval_images": "ei", "eval_labels": "el"},
          "train": {"batch_size": 4}})";
  const Dataset d = make_dataset(parse_spec(text, path("spec.json")));
  EXPECT_EQ(d.train_size(), 20);
  EXPECT_EQ(d.eval_size(), 8);
}

TEST_F(Idx, BadMagic) {
  write("ti", idx_images(20, 3, 4, 0x801));
  expect_error(spec(),
               path("ti") + ": not an idx image file: magic 0x00000801, expected 0x00000803");
  write("ti", idx_images(20, 3, 4));
  write("tl", idx_labels(20, 5, 0x803));
  expect_error(spec(),
               "data.train_labels: " + path("tl") + ": not an idx label file: magic 0x00000803");
}

TEST_F(Idx, LabelsAndImagesSwapped) {
  DataSpec d = spec();
  std::swap(d.train_images, d.train_labels);
  // The images first, as the spec lists them.
  expect_error(d, "data.train_images: " + path("tl") + ": not an idx image file");
}

TEST_F(Idx, TruncatedAndOversized) {
  std::string im = idx_images(20, 3, 4);
  write("ti", im.substr(0, im.size() - 1));
  expect_error(spec(), path("ti") + ": truncated: the header says 20 images of 3x4 (256 bytes");
  write("ti", im + "x");
  expect_error(spec(), "trailing data");
  write("ti", im.substr(0, 10));
  expect_error(spec(), "shorter than the 16-byte header");
  write("ti", "");
  expect_error(spec(), "shorter than the 16-byte header");
  write("ti", im);
  const std::string lb = idx_labels(20, 5);
  write("tl", lb.substr(0, lb.size() - 3));
  expect_error(spec(), path("tl") + ": truncated: the header says 20 labels");
  // Dims whose product overflows 64 bits must not wrap around to a plausible size.
  std::string huge;
  put_be32(huge, 0x803);
  for (int i = 0; i < 3; ++i) put_be32(huge, 0xffffffffu);
  write("ti", huge);
  expect_error(spec(), "truncated");
}

TEST_F(Idx, LabelOutOfRange) {
  std::string lb = idx_labels(20, 5);
  lb[8 + 17] = 9;  // past the samples used: still a wrong file
  write("tl", lb);
  expect_error(spec(), "data.train_labels: " + path("tl") +
                           ": label 9 at index 17 is out of range for model.num_classes 5");
  write("tl", idx_labels(20, 5));
  expect_error(spec(), "label 3 at index 3 is out of range for model.num_classes 3", 12, 3);
}

TEST_F(Idx, CountMismatch) {
  write("tl", idx_labels(19, 5));
  expect_error(spec(), path("tl") + ": 19 labels, but " + path("ti") + " has 20 images");
}

TEST_F(Idx, WrongDims) {
  expect_error(spec(), path("ti") + ": images are 3x4 = 12 pixels, but model.input_dim is 784",
               784);
}

TEST_F(Idx, TooFewSamples) {
  EXPECT_EQ(error_of(spec(21)),
            "data.train_images: " + path("ti") + ": 20 images, but data.train_samples asks for 21");
  expect_error(spec(16, 9), path("ei") + ": 8 images, but data.eval_samples asks for 9");
}

// A spec without train_samples or eval_samples asks for the defaults, numbers the user never
// wrote: the message says where they come from.
TEST_F(Idx, TooFewForTheDefaultCountSaysItIsTheDefault) {
  const DataSpec defaults;
  EXPECT_EQ(error_of(spec(defaults.train_samples)),
            "data.train_images: " + path("ti") +
                ": 20 images, but data.train_samples asks for 60000 (its default, when "
                "the spec does not set it)");
  EXPECT_EQ(error_of(spec(16, defaults.eval_samples)),
            "data.eval_images: " + path("ei") +
                ": 8 images, but data.eval_samples asks for 10000 (its default, when the "
                "spec does not set it)");
}

TEST_F(Idx, MissingFile) {
  DataSpec d = spec();
  d.eval_labels = path("nope");
  expect_error(
      d, "data.eval_labels: " + path("nope") + ": cannot read idx file: No such file or directory");
}

// A FIFO with no writer used to block the run forever; a directory gave a read error.
TEST_F(Idx, FifosAndDirectoriesAreRefused) {
  ASSERT_EQ(mkfifo(path("fifo").c_str(), 0600), 0);
  DataSpec d = spec();
  d.train_images = path("fifo");
  expect_error(d, path("fifo") + ": cannot read idx file: is a FIFO, expected a regular file");
  fs::create_directory(path("sub"));
  d.train_images = path("sub");
  expect_error(d, path("sub") + ": cannot read idx file: is a directory");
}

// 0 images of (2^32-1)^2 pixels: a header that fits in 16 bytes, whose pixel count overflowed
// int64 (UBSan) in the check against the model's input size.
TEST_F(Idx, HugeDimsWithNoImagesDoNotOverflow) {
  std::string empty;
  put_be32(empty, 0x803);
  put_be32(empty, 0);
  put_be32(empty, 0xffffffffu);
  put_be32(empty, 0xffffffffu);
  write("ti", empty);
  expect_error(spec(), "images are 4294967295x4294967295 = 18446744065119617025 pixels");
}

// Bytes past the header's labels are trailing data, as past its images: the file is another set's.
TEST_F(Idx, TrailingBytesAfterTheLabelsAreRefused) {
  write("tl", idx_labels(20, 5) + "x");
  EXPECT_EQ(error_of(spec()), "data.train_labels: " + path("tl") +
                                  ": trailing data: the header says 20 labels (28 bytes with the "
                                  "header), the file has 29 bytes");
}

// Each mismatch names the key of the file that is wrong: the images' size is the images' key,
// a label count that is not the images' the labels' key, in either split.
TEST_F(Idx, EachMismatchNamesTheKeyOfTheFileAtFault) {
  EXPECT_EQ(error_of(spec(), 784), "data.train_images: " + path("ti") +
                                       ": images are 3x4 = 12 pixels, but model.input_dim is 784");
  write("el", idx_labels(7, 5));
  EXPECT_EQ(error_of(spec()),
            "data.eval_labels: " + path("el") + ": 7 labels, but " + path("ei") + " has 8 images");
}

// The magic is all four bytes: two zero bytes, the type (0x08, unsigned bytes) and the number of
// dims. A file whose first two bytes are not zero is no idx file, whatever its last two say.
TEST_F(Idx, TheMagicsFirstTwoBytesAreZero) {
  write("ti", idx_images(20, 3, 4, 0xffff0803u));
  expect_error(spec(), "data.train_images: " + path("ti") +
                           ": not an idx image file: magic 0xffff0803, expected 0x00000803");
  write("ti", idx_images(20, 3, 4));
  write("el", idx_labels(8, 5, 0x00010801u));
  expect_error(spec(), "data.eval_labels: " + path("el") +
                           ": not an idx label file: magic 0x00010801, expected 0x00000801");
}

// More labels than images is a mismatch as fewer are: one of the files is another set's.
TEST_F(Idx, MoreLabelsThanImagesIsRefused) {
  write("tl", idx_labels(21, 5));
  EXPECT_EQ(error_of(spec()), "data.train_labels: " + path("tl") + ": 21 labels, but " +
                                  path("ti") + " has 20 images");
}

}  // namespace
}  // namespace mpbench
