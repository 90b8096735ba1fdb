#pragma once
// The synthetic image classification task of the resnet_bottleneck family (NHWC fp32 pixels).
//
// The task: one shared set V of m*m "motif pixels", each a vector of in_channels values, and per
// class c a permutation pi_c of the m*m positions. Class c's motif is the m x m patch whose pixel
// at position j is V[pi_c(j)]: every class uses exactly the same pixel vectors, arranged
// differently. A sample draws a class uniformly; the image is cut into n x n cells of about
// cell_size pixels (n = max(1, image_size / cell_size), the last row and column of cells take
// the remainder), and each cell gets one copy of the class's motif at a uniformly random offset
// inside it:
//     x = noise + amplitude * (motif_c at each of those n*n positions),
// with i.i.d. zero-mean, unit-variance noise everywhere. V is centred and scaled per channel
// (zero mean, unit mean square over the m*m pixels). One copy per cell keeps the fraction of
// signal pixels (m^2 / cell_size^2) the same at 8x8 and at 56x56, so that the global average
// pool of the big configs does not dilute the evidence to nothing.
//
// Why a conv net must learn spatial structure: the multiset of pixel vectors of an image has the
// same distribution for every class, so any per-pixel function (a stack of 1x1 convolutions,
// any nonlinearity, per-channel means or variances) pooled over the image is exactly at chance
// (1 / num_classes). Only filters that see neighbouring pixels together (the 3x3 convolutions)
// can tell the arrangements apart, and since the motif moves, the model has to detect it
// wherever it sits (global pooling of local detectors, as in a real ResNet).
//
// Determinism and speed: V and the permutations come from Rng(seed, 0); sample i of the train
// (eval) split from its own Rng stream, so the bytes depend only on the seed and the index, on
// every platform, and the samples are generated on all hardware threads. The noise is the
// Irwin-Hall sum of four 16-bit uniforms from one 64-bit draw, rescaled to unit variance (a
// close, bounded approximation of a Gaussian, |n| <= 2 sqrt 3): integer arithmetic and one
// multiply per value instead of a log and a sqrt per pair. configs/resnet50_conv2.json's 2560
// images of 56x56x64 (514M values) take 4.3 s on 2 busy cores.
//
// Measured (CPU backend): configs/tiny_resnet.json (8x8x4 images, 4 classes, one 4x4 motif at
// amplitude 1.5; two blocks, width 8, out 16, stride 2; sgd lr 0.05 momentum 0.9, batch 32, 2048
// train / 512 eval samples, 4 epochs, seed 7) reaches 0.963 eval accuracy in fp32 (0.61 after
// the first epoch; tf32 0.971, amp_fp16 0.973, amp_bf16 0.959). Chance, and the accuracy of a
// classifier on per-channel means and mean squares, is 0.25 (test_resnet.cpp measures the latter).
// Wider images learn faster: 28x28x32, 10 classes, two blocks of width 32, batch 64, sgd 0.1
// reaches 1.0 after 32 steps.
#include <cstdint>
#include <vector>

#include "models/dataset.h"

namespace mpbench {

struct SyntheticImageTask {
  // Motif side m (clamped to the image size). The number of distinct arrangements, (m*m)!, is
  // far above any class count.
  int motif_size = 4;
  // Motif pixel values relative to the noise (both unit mean square). Lower is harder.
  double amplitude = 1.5;
  // One motif copy per cell_size x cell_size cell (>= motif_size).
  int cell_size = 8;
};

Dataset make_synthetic_images(const ResnetSpec& r, int64_t n_train, int64_t n_eval, uint64_t seed,
                              const SyntheticImageTask& task = SyntheticImageTask{},
                              const DataProgress& progress = {});

// The motif of each class, (num_classes, m, m, in_channels) row-major, as the generator uses it
// (exposed for tests).
std::vector<float> synthetic_image_motifs(const ResnetSpec& r, uint64_t seed,
                                          const SyntheticImageTask& task = SyntheticImageTask{});

// The most classes the task can tell apart at r's image size: the distinct arrangements of the
// motif, (m*m)! with m = min(motif_size, image_size), capped at INT64_MAX. 1 for 1x1 images,
// 24 for 2x2. Spec validation holds num_classes to it.
int64_t synthetic_image_max_classes(const ResnetSpec& r,
                                    const SyntheticImageTask& task = SyntheticImageTask{});

}  // namespace mpbench
