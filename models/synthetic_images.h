#pragma once
// The synthetic image classification task of the resnet_bottleneck family (NHWC fp32 pixels).
#include <cstdint>

#include "models/dataset.h"

namespace mpbench {

struct SyntheticImageTask {};

Dataset make_synthetic_images(const ResnetSpec& r, int64_t n_train, int64_t n_eval, uint64_t seed,
                              const SyntheticImageTask& task = SyntheticImageTask{});

}  // namespace mpbench
