#pragma once
// The resnet_bottleneck family (DESIGN.md): ResNet-50 v1.5 bottleneck blocks on NHWC images,
// global average pooling and a linear head. Layers: "block1" .. "blockN", "head".
#include <memory>
#include <vector>

#include "models/model.h"

namespace mpbench {

// Appends the family's layers for one precision mode. Input: (rows, H*W*C) fp32 pixels.
void build_resnet(const Spec& spec, const ResnetSpec& r, Precision precision,
                  std::vector<std::unique_ptr<Layer>>& layers);

}  // namespace mpbench
