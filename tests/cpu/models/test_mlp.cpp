// The mlp family on the CPU backend: Model::backward against central differences of the model's
// own fp32 loss for each activation. Between two Linear layers the lower one's activation
// backward and bias gradient ride on the upper one's dX GEMM (Model::backward's fused protocol),
// which GELU, unlike ReLU's mask, would not survive being applied twice.
#include <gtest/gtest.h>

#include "model_harness.h"
#include "models/model.h"
#include "test_util.h"

namespace mpbench {
namespace {

Spec mlp_spec(Activation act) {
  Spec s;
  s.name = "t";
  s.family = "mlp";
  MlpSpec m;
  m.input_dim = 5;
  m.hidden = {6, 4};
  m.num_classes = 3;
  m.activation = act;
  s.model = m;
  return s;
}

TEST(Mlp, GradientsMatchCentralDifferencesForEachActivation) {
  for (Activation act : {Activation::Relu, Activation::Gelu, Activation::None}) {
    SCOPED_TRACE(activation_name(act));
    test::expect_gradients_match_central_differences(mlp_spec(act));
  }
}

// fp32_layers keeps a layer's operands in fp32; its GEMMs then run as the mode runs fp32 ones:
// strict in the AMP modes and fp32, on TF32 tensor cores in tf32 (as autocast leaves
// allow_tf32 to the fp32 matmuls it does not cast). Unpinned layers take the mode's dtype.
TEST(Fp32Layers, APinnedLayerRunsTheModesFp32Math) {
  const std::vector<std::string> pinned = {"head"};
  for (Precision p : all_precisions()) {
    SCOPED_TRACE(precision_name(p));
    const LayerPrecision head = layer_precision(p, pinned, "head");
    EXPECT_EQ(head.compute, DType::F32);
    EXPECT_EQ(head.math, p == Precision::TF32 ? GemmMath::TF32 : GemmMath::Strict);
    EXPECT_FALSE(head.fp8);
    const LayerPrecision fc1 = layer_precision(p, pinned, "fc1");
    EXPECT_EQ(fc1.compute, precision_info(p).compute_dtype);
    EXPECT_EQ(fc1.fp8, p == Precision::AMP_FP8);
  }
}

// The weights an MLP allocates: its parameters' flat buffer in the dtype its math reads (the
// fp32 master itself in fp32, the 16-bit copy in amp_bf16, beside an fp32 master of its own
// category), and in amp_bf16 the head's bias widened to fp32 for its fp32 logits' epilogue,
// which fp32 has no need of.
TEST(Mlp, WeightsAreTheParametersAndTheHeadsWidenedBiasInAmp) {
  auto be = make_reference_backend();
  const int64_t classes = 3;
  for (Precision p : {Precision::FP32, Precision::AMP_BF16}) {
    SCOPED_TRACE(precision_name(p));
    TrackingAllocator alloc(*be, TrackingAllocator::Mode::Count);
    Model m(mlp_spec(Activation::Relu), p);
    m.allocate(alloc, *be, 8, 1);
    const size_t n = static_cast<size_t>(m.params().numel());
    if (p == Precision::FP32) {
      EXPECT_EQ(alloc.current(MemCategory::Weights), n * 4);
      EXPECT_EQ(alloc.current(MemCategory::MasterWeights), 0u);
    } else {
      EXPECT_EQ(alloc.current(MemCategory::Weights), n * 2 + classes * 4);
      EXPECT_EQ(alloc.current(MemCategory::MasterWeights), n * 4);
    }
  }
}

// What fc1 keeps for its backward before a pinned fc2 (per sample, amp_bf16): its input's bf16
// cast (5 values) and what its activation's derivative is read from, 6 values: ReLU's output
// (fc2 keeps an fp32 cast, not the output itself), GELU's pre-activation (not its output, which
// fc2 reads alone); nothing for no activation.
TEST(Mlp, EachActivationKeepsWhatItsDerivativeReads) {
  for (Activation act : {Activation::Relu, Activation::Gelu, Activation::None}) {
    Spec spec = mlp_spec(act);
    spec.fp32_layers = {"fc2"};
    const LayerInfo fc1 = Model(spec, Precision::AMP_BF16).layer_infos()[0];
    EXPECT_EQ(fc1.activation_bytes, 5 * 2 + (act == Activation::None ? 0 : 6 * 2))
        << activation_name(act);
  }
}

}  // namespace
}  // namespace mpbench
