#pragma once
// The synthetic image classification task of the resnet_bottleneck family (NHWC fp32 pixels).
//
// The task: one shared set V of m*m "motif pixels", each a vector of in_channels values, and per
// class c a permutation pi_c of the m*m positions. Class c's motif is the m x m patch whose pixel
// at position j is V[pi_c(j)]: every class uses exactly the same pixel vectors, arranged
// differently. A sample draws a class uniformly and a position uniformly (the motif lies wholly
// inside the image) and is
//     x = noise + amplitude * motif_c placed at that position,
// with i.i.d. zero-mean, unit-variance noise everywhere. V is centred and scaled per channel
// (zero mean, unit mean square over the m*m pixels).
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
// multiply per value, about 1 ns, so a few thousand 56x56x64 images take about a second.
//
// Measured (fp32, CPU backend): configs/tiny_resnet.json (8x8x4 images, 4 classes, motif 4x4,
// amplitude 1.5; two blocks, width 8, out 16, stride 2; sgd 0.05 momentum 0.9, batch 32, 2048
// samples, 4 epochs) reaches 0.92-0.95 eval accuracy (amp_fp16 and amp_bf16 alike); chance, and
// what per-channel statistics can give, is 0.25.
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
};

Dataset make_synthetic_images(const ResnetSpec& r, int64_t n_train, int64_t n_eval, uint64_t seed,
                              const SyntheticImageTask& task = SyntheticImageTask{});

// The motif of each class, (num_classes, m, m, in_channels) row-major, as the generator uses it
// (exposed for tests).
std::vector<float> synthetic_image_motifs(const ResnetSpec& r, uint64_t seed,
                                          const SyntheticImageTask& task = SyntheticImageTask{});

}  // namespace mpbench
