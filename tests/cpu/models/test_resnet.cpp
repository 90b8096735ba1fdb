// The resnet_bottleneck family on the CPU backend: layer names and counts (the conv2_x block's
// 0.46 GFLOP, torchvision's parameter count), Model::backward against central differences of the
// model's own fp32 loss, running statistics in eval mode, the mixed-dtype paths, and the synthetic
// image task (deterministic, and not solvable from per-pixel statistics).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <set>

#include <gtest/gtest.h>

#include "model_harness.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/resnet.h"
#include "models/synthetic_images.h"
#include "test_util.h"

namespace mpbench {
namespace {

Spec resnet_spec(int64_t size, int64_t cin, int64_t width, int64_t cout, int64_t blocks,
                 int64_t stride, int64_t classes) {
  Spec s;
  s.name = "t";
  s.family = "resnet_bottleneck";
  ResnetSpec r;
  r.image_size = size;
  r.in_channels = cin;
  r.width = width;
  r.out_channels = cout;
  r.blocks = blocks;
  r.stride = stride;
  r.num_classes = classes;
  s.model = r;
  return s;
}

using Harness = test::ModelHarness;

TEST(Resnet, LayerNamesShapesAndDtypes) {
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_resnet.json");
  Model m(spec, Precision::AMP_FP16);
  EXPECT_EQ(m.layer_names(), (std::vector<std::string>{"block1", "block2", "pool", "head"}));
  const auto infos = m.layer_infos();
  ASSERT_EQ(infos.size(), 4u);
  EXPECT_EQ(infos[0].kind, "bottleneck+proj/s2");
  EXPECT_EQ(infos[1].kind, "bottleneck");
  EXPECT_EQ(infos[0].output_shape, (Shape{4, 4, 16}));
  EXPECT_EQ(infos[2].output_shape, (Shape{16}));
  EXPECT_EQ(infos[3].output_shape, (Shape{4}));
  EXPECT_EQ(infos[0].compute_dtype, DType::F16);
  EXPECT_EQ(infos[1].storage_dtype, DType::F16);
  EXPECT_EQ(infos[2].storage_dtype, DType::F16);
  EXPECT_EQ(infos[3].storage_dtype, DType::F32);
  // Saved per sample in fp16: block 2 keeps a1, h1, a2, h2 (4x4x8 each), a3 and y (4x4x16).
  EXPECT_EQ(infos[1].activation_bytes, (4 * 128 + 2 * 256) * 2);
  // Block 1 also keeps the projection's output and its fp16 copy of the 8x8x4 pixels.
  EXPECT_EQ(infos[0].activation_bytes, (2 * 512 + 2 * 128 + 2 * 256 + 256 + 256) * 2);
  Model f(spec, Precision::FP32);
  EXPECT_EQ(f.layer_infos()[1].activation_bytes, 2 * infos[1].activation_bytes);
  // In fp32 it keeps the 8x8x4 pixels as they came, which it counts: no layer before does.
  EXPECT_EQ(f.layer_infos()[0].activation_bytes, (2 * 512 + 2 * 128 + 2 * 256 + 256 + 256) * 4);
}

// The sublayer rows inspect shows: each convolution and batchnorm in the order they run, their
// fused ReLU and add named in the kind, the convolutions' channels for the alignment check.
TEST(Resnet, SublayersOfABlockAndTheStem) {
  const Spec spec = load_spec(test::source_dir() + "/configs/resnet50.json");
  Model m(spec, Precision::AMP_BF16);
  const auto infos = m.layer_infos();
  const LayerInfo& stem = infos[0];
  std::vector<std::string> names, kinds;
  for (const auto& c : stem.children) names.push_back(c.name + " " + c.kind);
  EXPECT_EQ(names,
            (std::vector<std::string>{"conv conv7x7/s2", "bn bn+relu", "maxpool maxpool3x3/s2"}));
  ASSERT_TRUE(stem.children[0].matmul.has_value());
  EXPECT_EQ(stem.children[0].matmul->misaligned(Precision::AMP_BF16, 256),
            std::vector<std::string>{"C_in=3"});
  EXPECT_TRUE(stem.children[0].matmul->misaligned(Precision::FP32, 256).empty());
  const LayerInfo& b = infos[4];  // stage2.block1: the strided projection block
  EXPECT_EQ(b.name, "stage2.block1");
  names.clear();
  for (const auto& c : b.children) names.push_back(c.name + " " + c.kind);
  EXPECT_EQ(names, (std::vector<std::string>{"conv1 conv1x1", "bn1 bn+relu", "conv2 conv3x3/s2",
                                             "bn2 bn+relu", "conv3 conv1x1", "bn3 bn+add+relu",
                                             "shortcut.conv conv1x1/s2", "shortcut.bn bn"}));
  ASSERT_EQ(b.children.size(), 8u);
  EXPECT_EQ(b.children[2].output_shape, (Shape{28, 28, 128}));
  EXPECT_EQ(b.children[1].compute_dtype, DType::F32);  // batch statistics
  EXPECT_EQ(b.children[1].storage_dtype, DType::BF16);
  EXPECT_EQ(b.children[6].matmul->n, 512);
  EXPECT_EQ(b.children[6].matmul->k, 256);
  for (const LayerInfo& li : infos)
    for (const LayerInfo& c : li.children)
      EXPECT_EQ(c.matmul.has_value(), c.kind.rfind("conv", 0) == 0) << li.name << "." << c.name;
}

TEST(Resnet, Conv2FirstBlockFlopsAndParams) {
  const Spec spec = load_spec(test::source_dir() + "/configs/resnet50_conv2.json");
  Model m(spec, Precision::FP32);
  const auto infos = m.layer_infos();
  ASSERT_GE(infos.size(), 5u);
  // 56x56: 1x1 64->64, 3x3 64->64, 1x1 64->256, projection 1x1 64->256.
  const double expected = 2.0 * 56 * 56 * (64 * 64 + 9 * 64 * 64 + 64 * 256 + 64 * 256);
  EXPECT_DOUBLE_EQ(infos[0].forward_flops, expected);
  EXPECT_NEAR(infos[0].forward_flops / 1e9, 0.46, 0.005);
  EXPECT_EQ(infos[0].output_shape, (Shape{56, 56, 256}));
  EXPECT_DOUBLE_EQ(conv_flops(ConvGeom{1, 56, 56, 64, 64, 3, 3, 56, 56, 1, 1}),
                   2.0 * 56 * 56 * 64 * 9 * 64);
  // torchvision's resnet50.layer1 has 215,808 parameters (convs and BN affine).
  int64_t blocks = 0;
  for (size_t i = 0; i < 3; ++i) blocks += infos[i].params;
  EXPECT_EQ(blocks, 215808);
  EXPECT_EQ(infos[3].params, 0);
  // Without a stem the first block's input gradient is the one not computed: its conv1's and
  // its projection's (the two convolutions that read the data).
  double forward = 0;
  for (const auto& li : infos) forward += li.forward_flops;
  EXPECT_DOUBLE_EQ(m.training_flops_per_sample(),
                   3 * forward - 2.0 * 56 * 56 * (64 * 64 + 64 * 256));
}

TEST(Resnet, ParamStoreMatchesLayerInfos) {
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_resnet.json");
  Harness h(spec, Precision::FP32, 4);
  int64_t total = 0;
  for (const auto& li : h.model.layer_infos()) total += li.params;
  EXPECT_EQ(h.model.params().count(), total);
  // gamma starts at 1, beta at 0, conv weights within PyTorch's U(+-1/sqrt(fan_in)).
  const std::vector<float> w = test::to_host_f32(*h.be, h.model.params().master_flat());
  for (const auto& p : h.model.params().params()) {
    const bool gamma =
        p.name.find(".bn") != std::string::npos && p.name.find(".weight") != std::string::npos;
    const bool beta =
        p.name.find(".bn") != std::string::npos && p.name.find(".bias") != std::string::npos;
    float lo = 1e9f, hi = -1e9f;
    for (int64_t i = 0; i < p.shape.numel(); ++i) {
      lo = std::min(lo, w[p.offset + i]);
      hi = std::max(hi, w[p.offset + i]);
    }
    if (gamma) {
      EXPECT_EQ(lo, 1.0f) << p.name;
      EXPECT_EQ(hi, 1.0f) << p.name;
    } else if (beta) {
      EXPECT_EQ(lo, 0.0f) << p.name;
      EXPECT_EQ(hi, 0.0f) << p.name;
    } else if (p.shape.rank == 4) {
      const float bound =
          1.0f / std::sqrt(static_cast<float>(p.shape[1] * p.shape[2] * p.shape[3]));
      EXPECT_LE(hi, bound) << p.name;
      EXPECT_GE(lo, -bound) << p.name;
      EXPECT_GT(hi - lo, bound) << p.name;  // spread, not constant
    }
  }
}

// Model::backward against central differences of the model's own fp32 loss (model_harness.h),
// for every parameter of a small model with a projection block (stride 2) and an identity block:
// a missing identity-shortcut gradient or ReLU mask gives errors of 50% and more.
using test::expect_gradients_match_central_differences;

TEST(Resnet, GradientsMatchCentralDifferences) {
  expect_gradients_match_central_differences(resnet_spec(6, 3, 4, 8, 2, 2, 3));
}

// The whole-network form: the ImageNet stem (conv 7x7/2, BN, ReLU, max pool 3x3/2) before two
// stages, the second with stride 2; the stem's conv and BN get their gradients through the pool.
TEST(Resnet, StemAndStagesGradientsMatchCentralDifferences) {
  Spec spec = resnet_spec(16, 3, 0, 0, 0, 1, 3);
  auto& r = std::get<ResnetSpec>(spec.model);
  r.stem = "imagenet";
  r.stem_channels = 4;
  r.stages = {{1, 4, 8, 1}, {1, 4, 8, 2}};
  Model m(spec, Precision::FP32);
  EXPECT_EQ(m.layer_names(),
            (std::vector<std::string>{"stem", "stage1.block1", "stage2.block1", "pool", "head"}));
  EXPECT_EQ(m.layer_infos()[0].output_shape, (Shape{4, 4, 4}));  // 16 -> 8 -> 4
  expect_gradients_match_central_differences(spec);
}

// configs/resnet50.json is torchvision's resnet50 (v1.5): its parameters, and its multiply-adds
// per 224x224 image in the convolutions and the classifier.
TEST(Resnet, WholeResnet50CountsMatchTorchvision) {
  const Spec spec = load_spec(test::source_dir() + "/configs/resnet50.json");
  Model m(spec, Precision::FP32);
  int64_t params = 0;
  double flops = 0;
  for (const auto& li : m.layer_infos()) {
    params += li.params;
    flops += li.forward_flops;
  }
  EXPECT_EQ(params, 25557032);
  // 2 FLOPs per multiply-add, of the convolutions and the classifier only (not the pooling's,
  // batch normalisation's or bias's adds).
  EXPECT_DOUBLE_EQ(flops, 2.0 * 4089184256.0);
  // A training step: 3x the forward pass less the input gradient of the stem's convolution,
  // which reads the data (7x7, 3 -> 64 channels over a 112x112 output).
  EXPECT_DOUBLE_EQ(m.training_flops_per_sample(), 3 * flops - 2.0 * 112 * 112 * 64 * 49 * 3);
  const auto names = m.layer_names();
  ASSERT_EQ(names.size(), 19u);
  EXPECT_EQ(names.front(), "stem");
  EXPECT_EQ(names[1], "stage1.block1");
  EXPECT_EQ(names[16], "stage4.block3");
  EXPECT_EQ(m.layer_infos()[0].output_shape, (Shape{56, 56, 64}));
  EXPECT_EQ(m.layer_infos()[16].output_shape, (Shape{7, 7, 2048}));
}

TEST(Resnet, EvalModeUsesRunningStatistics) {
  const Spec spec = resnet_spec(6, 3, 4, 8, 2, 2, 3);
  Harness h(spec, Precision::FP32, 8);
  const int64_t k = h.model.num_classes();
  // Training mode: a sample's logits depend on the rest of the batch (batch statistics).
  const std::vector<float> train_full = h.logits(8);
  const std::vector<float> train_two = h.logits(2);
  double diff = 0;
  for (int64_t i = 0; i < 2 * k; ++i)
    diff = std::max(diff, double{std::fabs(train_full[i] - train_two[i])});
  EXPECT_GT(diff, 1e-3);
  // Many training passes over one batch bring the running statistics to its statistics.
  for (int i = 0; i < 250; ++i) h.logits(8);
  h.model.set_training(false);
  const std::vector<float> eval_full = h.logits(8);
  const std::vector<float> eval_two = h.logits(2);
  // Eval mode: per-sample, whatever the batch.
  for (int64_t i = 0; i < 2 * k; ++i) EXPECT_NEAR(eval_full[i], eval_two[i], 1e-5) << i;
  // And close to the training output of that batch (unbiased vs biased variance over 72 and 18
  // values per channel is the only difference).
  h.model.set_training(true);
  const std::vector<float> train_again = h.logits(8);
  double num = 0, den = 0;
  for (size_t i = 0; i < train_again.size(); ++i) {
    num += (eval_full[i] - train_again[i]) * (eval_full[i] - train_again[i]);
    den += train_again[i] * train_again[i];
  }
  EXPECT_LT(std::sqrt(num / den), 0.1);
  EXPECT_GT(std::sqrt(num / den), 0.0);
}

// A pinned fp32 block between fp16 ones takes the cast paths both ways; the gradients stay close
// to the fp32 model's.
TEST(Resnet, MixedPrecisionPathsMatchFp32) {
  Spec spec = resnet_spec(8, 4, 8, 16, 3, 2, 4);
  spec.fp32_layers = {"block2"};
  Harness lo(spec, Precision::AMP_FP16, 8);
  const auto infos = lo.model.layer_infos();
  EXPECT_EQ(infos[0].compute_dtype, DType::F16);
  EXPECT_EQ(infos[1].compute_dtype, DType::F32);
  EXPECT_EQ(infos[2].compute_dtype, DType::F16);
  const std::vector<float> g16 = lo.gradients();
  Harness ref(resnet_spec(8, 4, 8, 16, 3, 2, 4), Precision::FP32, 8);
  const std::vector<float> g32 = ref.gradients();
  ASSERT_EQ(g16.size(), g32.size());
  const auto cmp = test::compare(g16, g32, 0.05);
  EXPECT_TRUE(cmp.ok) << cmp.message << " rel " << cmp.rel_error;
  Spec bf = resnet_spec(8, 4, 8, 16, 3, 2, 4);
  Harness b16(bf, Precision::AMP_BF16, 8);
  const auto cmpb = test::compare(b16.gradients(), g32, 0.1);
  EXPECT_TRUE(cmpb.ok) << cmpb.message << " rel " << cmpb.rel_error;
}

// AMP modes take a convolution's weight gradient through one 16-bit buffer, sized for the largest
// filter of any layer, a projection's included: a 32 -> 32 projection (1024 weights) around a
// width of 2 (the block's other filters hold at most 64) gets its gradient as fp32 does.
TEST(Resnet, AProjectionWiderThanItsBlockGetsItsWeightGradientInAmpModes) {
  const Spec spec = resnet_spec(4, 32, 2, 32, 1, 2, 3);
  Harness ref(spec, Precision::FP32, 8);
  const std::vector<float> g32 = ref.gradients();
  for (Precision p : {Precision::AMP_FP16, Precision::AMP_BF16}) {
    Harness h(spec, p, 8);
    const auto c = test::compare(h.gradients(), g32, 0.1);
    EXPECT_TRUE(c.ok) << precision_name(p) << ": " << c.message << " rel " << c.rel_error;
  }
}

// The stem keeps, per sample and in the compute dtype, its convolution's output with the pixels
// as its convolution reads them (their cast, or the fp32 batch itself), the batchnorm + ReLU
// output and the pooled output: half of fp32's bytes in amp_bf16, row by row.
TEST(Resnet, TheStemKeepsItsOutputsInTheComputeDtype) {
  const Spec spec = load_spec(test::source_dir() + "/configs/resnet50.json");
  for (Precision p : {Precision::FP32, Precision::AMP_BF16}) {
    SCOPED_TRACE(precision_name(p));
    const LayerInfo stem = Model(spec, p).layer_infos()[0];
    const int64_t es = static_cast<int64_t>(dtype_size(precision_info(p).compute_dtype));
    ASSERT_EQ(stem.children.size(), 3u);
    EXPECT_EQ(stem.children[0].activation_bytes, (112 * 112 * 64 + 224 * 224 * 3) * es);
    EXPECT_EQ(stem.children[1].activation_bytes, 112 * 112 * 64 * es);
    EXPECT_EQ(stem.children[2].activation_bytes, 56 * 56 * 64 * es);
  }
}

TEST(Resnet, UnknownFp32LayerIsBadInput) {
  Spec spec = resnet_spec(8, 4, 8, 16, 2, 2, 4);
  spec.fp32_layers = {"fc1"};
  EXPECT_THROW(Model(spec, Precision::AMP_FP16), Error);
  spec.fp32_layers = {"block2", "pool", "head"};
  EXPECT_NO_THROW(Model(spec, Precision::AMP_FP16));
}

// ---- the synthetic image task ------------------------------------------------------------------

ResnetSpec image_spec(int64_t size, int64_t c, int64_t classes) {
  return std::get<ResnetSpec>(resnet_spec(size, c, 8, 16, 1, 1, classes).model);
}

TEST(SyntheticImages, DeterministicFromTheSeed) {
  const ResnetSpec r = image_spec(8, 4, 4);
  const Dataset a = make_synthetic_images(r, 200, 50, 7);
  const Dataset b = make_synthetic_images(r, 200, 50, 7);
  const Dataset c = make_synthetic_images(r, 200, 50, 8);
  EXPECT_EQ(a.sample_dim, 8 * 8 * 4);
  EXPECT_EQ(a.num_classes, 4);
  EXPECT_EQ(a.input_dtype, DType::F32);
  EXPECT_EQ(a.labels_per_sample, 1);
  ASSERT_EQ(a.train_x.size(), 200u * 256);
  ASSERT_EQ(a.eval_x.size(), 50u * 256);
  EXPECT_EQ(a.train_x, b.train_x);
  EXPECT_EQ(a.eval_x, b.eval_x);
  EXPECT_EQ(a.train_y, b.train_y);
  EXPECT_NE(a.train_x, c.train_x);
  // Splits are separate streams; a longer split starts with the same samples.
  EXPECT_NE(std::vector<float>(a.train_x.begin(), a.train_x.begin() + 256),
            std::vector<float>(a.eval_x.begin(), a.eval_x.begin() + 256));
  const Dataset longer = make_synthetic_images(r, 400, 50, 7);
  EXPECT_TRUE(std::equal(a.train_x.begin(), a.train_x.end(), longer.train_x.begin()));
  // Threaded generation (a big split) gives the bytes of the serial one for shared samples; a
  // prime count, so that no thread count splits it evenly (the sanitizer build sees a share
  // written past the end).
  const Dataset big = make_synthetic_images(r, 5003, 50, 7);
  EXPECT_TRUE(std::equal(a.train_x.begin(), a.train_x.end(), big.train_x.begin()));
  EXPECT_FALSE(a.description.empty());
}

// The motif copies reach every row and column: each cell's last ones (a copy's offset goes up to
// the cell's extent less the motif), and the last cell takes the remainder of an image its cells
// do not divide (28 = 9 + 9 + 10). At amplitude 1000 a motif pixel stands far above the noise
// (|noise| <= 2 sqrt 3).
TEST(SyntheticImages, MotifsReachEveryRowAndColumn) {
  SyntheticImageTask task;
  task.amplitude = 1000;
  for (int64_t size : {8, 12, 28}) {
    SCOPED_TRACE(size);
    const ResnetSpec r = image_spec(size, 1, 4);
    const Dataset d = make_synthetic_images(r, 1000, 1, 3, task);
    std::vector<bool> rows(size), cols(size);
    for (size_t i = 0; i < d.train_x.size(); ++i) {
      if (std::fabs(d.train_x[i]) < 20) continue;
      const int64_t pixel = static_cast<int64_t>(i) % (size * size);
      rows[pixel / size] = true;
      cols[pixel % size] = true;
    }
    for (int64_t k = 0; k < size; ++k) {
      EXPECT_TRUE(rows[k]) << "no motif on row " << k;
      EXPECT_TRUE(cols[k]) << "no motif on column " << k;
    }
  }
}

TEST(SyntheticImages, BalancedUnitScaleNoise) {
  const ResnetSpec r = image_spec(16, 8, 5);
  const Dataset d = make_synthetic_images(r, 2000, 10, 1);
  std::vector<int> count(5, 0);
  for (int32_t y : d.train_y) {
    ASSERT_GE(y, 0);
    ASSERT_LT(y, 5);
    ++count[y];
  }
  for (int c : count) EXPECT_NEAR(c, 400, 80);
  double sum = 0, sq = 0;
  for (float v : d.train_x) {
    sum += v;
    sq += double{v} * v;
  }
  const double n = static_cast<double>(d.train_x.size());
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  // Unit noise plus four motif copies (one per 8x8 cell), 64 of 256 pixels at amplitude 1.5.
  EXPECT_NEAR(sq / n, 1.0 + 2.25 / 4.0, 0.02);
}

// Every class's motif holds the same pixel vectors: only their arrangement differs.
TEST(SyntheticImages, MotifsArePermutationsOfOneSet) {
  const ResnetSpec r = image_spec(8, 3, 6);
  const std::vector<float> m = synthetic_image_motifs(r, 11);
  const int64_t pixels = 16, c = 3;
  ASSERT_EQ(m.size(), static_cast<size_t>(6 * pixels * c));
  auto sorted_pixels = [&](int64_t k) {
    std::vector<std::vector<float>> v;
    for (int64_t j = 0; j < pixels; ++j)
      v.emplace_back(m.begin() + (k * pixels + j) * c, m.begin() + (k * pixels + j + 1) * c);
    std::sort(v.begin(), v.end());
    return v;
  };
  for (int64_t k = 1; k < 6; ++k) {
    EXPECT_EQ(sorted_pixels(k), sorted_pixels(0)) << k;
    EXPECT_NE(std::vector<float>(m.begin() + k * pixels * c, m.begin() + (k + 1) * pixels * c),
              std::vector<float>(m.begin(), m.begin() + pixels * c))
        << k;
  }
  for (int64_t ch = 0; ch < c; ++ch) {
    double s = 0, s2 = 0;
    for (int64_t j = 0; j < pixels; ++j) {
      s += m[j * c + ch];
      s2 += double{m[j * c + ch]} * m[j * c + ch];
    }
    EXPECT_NEAR(s, 0.0, 1e-5);
    EXPECT_NEAR(s2 / pixels, 1.0, 1e-5);
  }
}

// As many classes as the motif has arrangements, and no more: 1x1 images have one, 2x2 have 4! =
// 24 (all of them drawn, each once), and from 4x4 on the 4x4 motif has 16!.
TEST(SyntheticImages, ClassesUpToTheMotifsArrangements) {
  EXPECT_EQ(synthetic_image_max_classes(image_spec(1, 3, 2)), 1);
  EXPECT_EQ(synthetic_image_max_classes(image_spec(2, 3, 2)), 24);
  EXPECT_EQ(synthetic_image_max_classes(image_spec(3, 3, 2)), 362880);
  EXPECT_EQ(synthetic_image_max_classes(image_spec(4, 3, 2)), 20922789888000);
  EXPECT_EQ(synthetic_image_max_classes(image_spec(56, 3, 2)), 20922789888000);
  const std::vector<float> m = synthetic_image_motifs(image_spec(2, 1, 24), 5);
  std::set<std::vector<float>> distinct;
  for (int64_t k = 0; k < 24; ++k) distinct.emplace(m.begin() + k * 4, m.begin() + (k + 1) * 4);
  EXPECT_EQ(distinct.size(), 24u);
  EXPECT_THROW(synthetic_image_motifs(image_spec(2, 1, 25), 5), Error);
}

// Features: per-channel mean and mean square of an image (what global pooling of per-pixel
// functions sees first).
std::vector<double> channel_stats(const float* img, int64_t hw, int64_t c) {
  std::vector<double> f(static_cast<size_t>(2 * c), 0.0);
  for (int64_t p = 0; p < hw; ++p)
    for (int64_t ch = 0; ch < c; ++ch) {
      f[ch] += img[p * c + ch] / static_cast<double>(hw);
      f[c + ch] += double{img[p * c + ch]} * img[p * c + ch] / static_cast<double>(hw);
    }
  return f;
}

// Eval accuracy of a nearest-class-centroid classifier on per-channel statistics (standardised).
double channel_stats_accuracy(const Dataset& d, int64_t hw, int64_t c) {
  const int k = d.num_classes;
  const int64_t nf = 2 * c;
  std::vector<double> centroid(static_cast<size_t>(k * nf), 0.0), mean(nf, 0.0), var(nf, 0.0);
  std::vector<int> count(k, 0);
  for (int64_t i = 0; i < d.train_size(); ++i) {
    const auto f = channel_stats(d.train_x.data() + i * d.sample_dim, hw, c);
    for (int64_t j = 0; j < nf; ++j) {
      centroid[d.train_y[i] * nf + j] += f[j];
      mean[j] += f[j];
      var[j] += f[j] * f[j];
    }
    ++count[d.train_y[i]];
  }
  const double n = static_cast<double>(d.train_size());
  for (int64_t j = 0; j < nf; ++j) {
    mean[j] /= n;
    var[j] = var[j] / n - mean[j] * mean[j];
  }
  for (int cl = 0; cl < k; ++cl)
    for (int64_t j = 0; j < nf; ++j) centroid[cl * nf + j] /= std::max(count[cl], 1);
  int64_t right = 0;
  for (int64_t i = 0; i < d.eval_size(); ++i) {
    const auto f = channel_stats(d.eval_x.data() + i * d.sample_dim, hw, c);
    int best = 0;
    double best_d = 1e300;
    for (int cl = 0; cl < k; ++cl) {
      double dist = 0;
      for (int64_t j = 0; j < nf; ++j) {
        const double t = (f[j] - centroid[cl * nf + j]);
        dist += t * t / var[j];
      }
      if (dist < best_d) best_d = dist, best = cl;
    }
    right += best == d.eval_y[i];
  }
  return static_cast<double>(right) / static_cast<double>(d.eval_size());
}

TEST(SyntheticImages, PerChannelStatisticsAreAtChance) {
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_resnet.json");
  const auto& r = std::get<ResnetSpec>(spec.model);
  const Dataset d = make_synthetic_images(r, 8000, 2000, 7);
  const double acc = channel_stats_accuracy(d, r.image_size * r.image_size, r.in_channels);
  EXPECT_LT(acc, 1.0 / static_cast<double>(r.num_classes) + 0.05);
}

}  // namespace
}  // namespace mpbench
