#pragma once
// The mlp family: Linear layers on flat fp32 features (synthetic, or MNIST-format idx images).
//
// Layers (the names fp32_layers refers to): "fc1" .. "fcN" for the hidden layers, each
// Linear + the spec's activation, and "head", Linear(last width -> num_classes) with fp32 logits.
// Each computes in its layer_precision() dtype (models/linear.h).
#include <string>
#include <vector>

#include "models/spec.h"

namespace mpbench {

// "fc1", ..., "fcN", "head": the names fp32_layers refers to.
std::vector<std::string> mlp_layer_names(const MlpSpec& mlp);

}  // namespace mpbench
