#pragma once
#include "models/model.h"

namespace mpbench {

// y = act(x W^T + b), PyTorch's nn.Linear layout: W (out, in), b (out).
// x: (rows, in) -> y: (rows, out). A head (fp32_out) writes fp32 logits whatever its compute dtype,
// as autocast hands the loss fp32 logits.
//
// amp_fp8 (LayerPrecision::fp8), Transformer Engine's HYBRID recipe: the forward GEMM takes x and
// W cast to fp8_e4m3, the backward GEMMs dY cast to fp8_e5m2 (with x and W), each tensor with its
// own delayed scaling (ParamStore::fp8()); outputs, the bias and everything else stay bf16. The
// casts also write the transposed copies cuBLASLt's "TN" FP8 GEMMs need (fp8_gemm_fits). A pass
// whose sizes are not all multiples of 16 (an odd last evaluation batch, a width like 10) runs
// its GEMMs in bf16 instead; evaluation records no amax.
class Linear : public Layer {
 public:
  Linear(std::string name, int64_t in, int64_t out, Activation act, LayerPrecision prec,
         bool fp32_out);
  void declare_params(ParamStore& ps) override;
  // At construction: the weight is another layer's (out, in) parameter, whose index *param holds
  // once its owner declared it (before this layer's declare_params), and there is no bias (a head
  // tied to the token embedding). backward overwrites the weight's gradient, so the owner must
  // add its own to it afterwards.
  void use_shared_weight(const int* param);
  // Before allocate: memory for the output, the input gradient and the pre-activation, instead of
  // buffers of its own (an encoder layer lends its Linears the same as every other layer's, for
  // outputs nothing reads after the layer's forward and gradients used only within its backward,
  // and fc1 its own block, which also holds the attention scores). Undefined: its own.
  void borrow(const Tensor& y, const Tensor& dx, const Tensor& pre_act = Tensor{});
  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype, bool need_dx) override;
  Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x) override;
  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool need_dx) override;

  // Fused backward of two consecutive Linear layers, `upstream` feeding this one: this layer's
  // dX GEMM also applies upstream's activation derivative and writes upstream's bias gradient
  // (GemmDesc's backward epilogue), so upstream's backward must then be called with
  // dz_ready = true and skips its own bias_act_backward. upstream = nullptr: no fusion.
  // Only valid when can_fuse_upstream(*upstream).
  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool need_dx,
                  const Linear* upstream, bool dz_ready);
  // Whether this layer's dX GEMM can carry upstream's activation backward: it writes the
  // gradient in upstream's output dtype (no cast in between) and upstream is allocated for it.
  bool can_fuse_upstream(const Linear& upstream) const;
  LayerInfo info(DType input_dtype) const override;
  // Whether a pass over `rows` rows runs its GEMMs in FP8.
  bool runs_fp8(int64_t rows) const;
  DType output_dtype(DType) const override { return fp32_out_ ? DType::F32 : prec_.compute; }

 private:
  bool keeps_pre_act() const { return act_ == Activation::Gelu; }
  // The tensor act' is evaluated on for the last forward's rows (GELU: the pre-activation; ReLU:
  // the output, positive exactly where the pre-activation is); undefined for no activation.
  Tensor act_grad_input() const;
  // t (fp32: a weight's or bias's gradient, fp32 logits) rounded to the compute dtype, as
  // autocast's GEMMs write them, in an AMP mode; as it is in fp32 and tf32.
  void round_to_compute(Backend& be, Tensor& t) const;

  int64_t in_, out_;
  Activation act_;
  LayerPrecision prec_;
  bool fp32_out_;
  const int* shared_weight_ = nullptr;
  int w_ = -1, b_ = -1;  // b_ -1: no bias
  DType input_dtype_ = DType::F32;
  int64_t rows_ = 0;     // rows of the last forward
  Tensor x_cast_;        // the input in the compute dtype, when it arrives in another one
  Tensor x_saved_;       // the input the GEMM used (view), kept for dW
  Tensor pre_act_, y_;   // pre-activation (GELU only, saved for backward) and output
  Tensor dx_, dx_cast_;  // input gradient in the compute dtype, and cast back to the input's
  Tensor lent_y_, lent_dx_, lent_pre_act_;  // what borrow() gave
  // fp32 logits in an AMP mode: the bias's 16-bit copy widened for the GEMM's fp32 epilogue.
  Tensor bias_f32_;
  // amp_fp8: whether the weight's sizes let the layer run in FP8, the tensors' indices in
  // ParamStore::fp8(), the fp8 copies it keeps, x^T (for dW), W (out, in) and W^T, and the rows
  // they were allocated for (0: the batch does not fit). x (rows, in) for the forward GEMM and
  // dY (rows, out) and dY^T for the backward's are the model's (ParamStore::fp8_scratch()):
  // kFp8Rows, then kFp8Cols.
  bool fp8_ = false;
  int fp8_x_ = -1, fp8_w_ = -1, fp8_dy_ = -1;
  int64_t fp8_rows_ = 0;
  Tensor x8t_, w8_, w8t_;
  std::shared_ptr<GrowingScratch> fp8_scratch_;
  enum Fp8Slot { kFp8Rows, kFp8Cols };
};

}  // namespace mpbench
