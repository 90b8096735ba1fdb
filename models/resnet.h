#pragma once
// The resnet_bottleneck family (DESIGN.md): ResNet-50 v1.5 bottleneck stages on NHWC images,
// optionally after the ImageNet stem, global average pooling and a linear head.
//
// Layers (the names fp32_layers refers to):
//   "stem"                with "stem": "imagenet": 7x7 stride-2 pad-3 conv (stem_channels) ->
//                         BN -> ReLU -> 3x3 stride-2 pad-1 max pool
//   "block1" .. "blockN"  bottleneck blocks of the single-stage form ("stageS.blockB" with
//                         "stages"). A stage's first block holds its stride (and the projection
//                         when the shape changes); the others are stride 1 with out_channels in.
//   "pool"                global average pooling (N, P*Q, C) -> (N, C), in its input's dtype
//   "head"                Linear(out_channels -> num_classes), fp32 logits
//
// A block (v1.5: the stride sits on the 3x3 convolution):
//   conv1 1x1 (Cin -> width) -> bn1 -> ReLU -> conv2 3x3 pad 1, stride -> bn2 -> ReLU
//   -> conv3 1x1 (width -> out) -> bn3 (+ shortcut) -> ReLU
// where the shortcut is a 1x1 projection conv with the stride followed by its own BN when the
// stride is not 1 or Cin != out, the identity otherwise. bn3, the residual add and the final
// ReLU are one batchnorm_forward_train call; its backward also returns the gradient at the add,
// which is the shortcut's gradient. Convolutions have no bias (BN follows each of them).
// Parameters, PyTorch-style names: "blockK.conv1.weight" (K, R, S, C), "blockK.bn1.weight" and
// ".bias" (gamma, beta), ..., "blockK.shortcut.conv.weight", "blockK.shortcut.bn.weight/.bias".
//
// Precision: each block computes in its layer_precision() dtype: activations and conv operands in
// the compute dtype (the weights' low-precision copy in AMP modes), BN statistics, gamma and beta
// in fp32 (as autocast runs batch_norm), running statistics fp32 buffers. A block whose input
// arrives in another dtype (block 1's fp32 pixels in AMP modes) casts it first.
//
// Memory: each block keeps what its backward reads: conv1..3 outputs (a1, a2, a3), the two ReLU
// outputs (h1, h2, also the next conv's input), the projection conv's output and the block output
// y (ReLU mask of bn3, and the next block's input), plus the input cast when it made one. The
// gradients need no per-block buffers: backward runs one block at a time, so every block and the
// pool share one set of gradient buffers sized for the largest block (models/shared_scratch.h):
// two for the blocks' dx in turn (a block reads its dy from one and writes its dx to the other),
// one of the block output's shape (bn3's dx; the gradient at the add goes over the block's dy,
// and a projection's dx where that dy was once the shortcut BN has read it), two of the inner
// width. The stem's backward, the last, uses the output-shaped one and the dx slot block 1 does
// not write. The shortcut BN's forward output, needed only as bn3's residual input, lives in one
// of the gradient buffers, which are idle during the forward pass.
#include <memory>
#include <vector>

#include "models/model.h"

namespace mpbench {

// Appends the family's layers for one precision mode. Input: (rows, H*W*C) fp32 pixels.
void build_resnet(const Spec& spec, const ResnetSpec& r, Precision precision,
                  std::vector<std::unique_ptr<Layer>>& layers);

}  // namespace mpbench
