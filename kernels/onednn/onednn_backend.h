#pragma once
// The native CPU backend (`--device cpu`): GEMMs, convolutions, add and permute on oneDNN
// primitives, in f32 and in bf16 on the CPU's own bf16 instructions (AMX, AVX512-BF16); batch
// normalisation, LayerNorm, the activations, the softmaxes, the fp32/bf16 casts, AdamW and the
// gradient check on vectorised loops of its own, and the other ops as the reference's loops
// (CpuBackend) run over slices of their rows, all on all threads (OpenMP). Its numerics are those
// of each mode on real hardware; the GPU parity tests, built against it (tests/parity_env.h), hold
// them to the reference's with the same tolerances.
//
// Only fp32 and amp_bf16 run natively (oneDNN 2.6 has no CPU path for tf32, fp16 or fp8: those
// modes are `unsupported` rows); a GEMM of their dtypes called directly runs the reference's
// emulation and counts as a fallback call.
#include <dnnl.hpp>

#include <functional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/cpu/cpu_backend.h"

namespace mpbench::onednn {

// oneDNN's type of an f32 or bf16 tensor (the only dtypes the primitives here take).
inline dnnl::memory::data_type data_type(DType t) {
  return t == DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}
// Every primitive here takes its scratchpad from the caller (the run's tracked workspace).
inline dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}
// Workspace parts start on a cache line (and the widest vector load).
inline size_t align64(size_t n) {
  return (n + 63) / 64 * 64;
}

class OnednnBackend final : public cpu::CpuBackend {
 public:
  explicit OnednnBackend(int threads);
  ~OnednnBackend() override;

  // Whether oneDNN's primitives take dtype t here: f32 always, bf16 where oneDNN has bf16 kernels
  // for the ISA (AVX-512 and up). An op of another dtype runs the reference's emulation and counts
  // as a fallback call; a model never gets there, its mode being an unsupported row.
  bool native_dtype(DType t) const {
    return t == DType::F32 || (t == DType::BF16 && !info_.bf16_gemm.empty());
  }
  // With the GEMM ceilings, measured on the first call (a few hundred milliseconds that only a
  // run's record, `devices` and explain's bound need).
  DeviceInfo info() const override;
  std::map<std::string, int64_t> fallback_calls() const override { return fallback_calls_; }
  std::string fallback_path() const override {
    return "the reference's loops (oneDNN has no working or no JIT kernel for them here)";
  }
  void set_conv_workspace_provider(ConvWorkspaceProvider provider) override;
  size_t conv_workspace_bytes() const override { return provider_.alloc ? work_bytes_ : 0; }
  std::vector<std::string> kernel_implementations() const override;

  // One oneDNN primitive, created once per shape and reused.
  struct Cached {
    dnnl::primitive_desc_base pd;
    dnnl::primitive prim;
    size_t scratchpad_bytes = 0;
    std::string impl;  // impl_info_str(): "brg:avx512_core_amx_bf16"
    bool used = false;
    // Weights in a layout oneDNN chose (convolutions' filters, some GEMMs' B; chosen_weights):
    // that layout, and the reorder between it and the plain one.
    dnnl::memory::desc weights_md;
    dnnl::primitive reorder;
    size_t reorder_scratchpad_bytes = 0;
    bool reorder_out = false;  // from the chosen layout to the plain one
  };

 protected:
  void gemm_impl(const GemmDesc& d, const GemmGeom& g, const Tensor& a, const Tensor& b,
                 Tensor& c) override;
  void bias_act_backward_impl(Activation act, const Tensor& dy, const Tensor& pre_act, Tensor& dx,
                              Tensor* dbias) override;
  void conv2d_forward_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x, const Tensor& w,
                           Tensor& y) override;
  void conv2d_backward_data_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& dy,
                                 const Tensor& w, Tensor& dx) override;
  void conv2d_backward_filter_impl(const ConvDesc& d, const ConvGeom& g, const Tensor& x,
                                   const Tensor& dy, Tensor& dw) override;
  // Vectorised loops with the residual add and ReLU fused in (kernels/onednn/batchnorm.cpp).
  void batchnorm_forward_train_impl(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                                    const Tensor& gamma, const Tensor& beta, Tensor& running_mean,
                                    Tensor& running_var, Tensor& save_mean, Tensor& save_rstd,
                                    Tensor& y) override;
  void batchnorm_forward_eval_impl(const BatchNormDesc& d, const Tensor& x, const Tensor* residual,
                                   const Tensor& gamma, const Tensor& beta,
                                   const Tensor& running_mean, const Tensor& running_var,
                                   Tensor& y) override;
  void batchnorm_backward_impl(const Tensor& dy, const Tensor* relu_out, const Tensor& x,
                               const Tensor& gamma, const Tensor& save_mean,
                               const Tensor& save_rstd, Tensor& dx, Tensor& dgamma, Tensor& dbeta,
                               Tensor* d_pre) override;
  // Vectorised loops of their own (kernels/onednn/softmax.cpp, layernorm.cpp).
  void layernorm_forward_impl(float eps, const Tensor& x, const Tensor& gamma, const Tensor& beta,
                              Tensor& y, Tensor& mean, Tensor& rstd) override;
  void layernorm_backward_impl(const Tensor& dy, const Tensor& x, const Tensor& gamma,
                               const Tensor& mean, const Tensor& rstd, Tensor& dx, Tensor& dgamma,
                               Tensor& dbeta) override;
  void softmax_xent_impl(const Tensor& logits, const Tensor& labels, Tensor* dlogits,
                         const Tensor* grad_scale, Tensor& loss_sum, Tensor& correct,
                         int64_t grad_rows) override;
  void attention_softmax_forward_impl(const Tensor& x, float scale, bool causal,
                                      Tensor& y) override;
  void attention_softmax_backward_impl(const Tensor& dy, const Tensor& y, float scale,
                                       Tensor& dx) override;
  // oneDNN's pooling primitive (kernels/onednn/pool.cpp).
  void avgpool_forward_impl(const Tensor& x, Tensor& y) override;
  void avgpool_backward_impl(const Tensor& dy, Tensor& dx) override;
  // oneDNN's binary primitive (kernels/onednn/eltwise.cpp).
  void add_impl(const Tensor& a, const Tensor& b, Tensor& out) override;
  // The reference's loops, over slices on all threads (kernels/onednn/parallel_ops.cpp).
  void fill_impl(Tensor& t, float value) override;
  void cast_impl(const Tensor& src, Tensor& dst) override;
  void round_to_impl(Tensor& t, DType to) override;
  // A reorder between two strides of the same dimensions (kernels/onednn/permute.cpp).
  void permute_impl(const Tensor& src, Tensor& dst, const std::array<int, 5>& perm) override;
  void unscale_check_norm_impl(Tensor& grads, const Tensor* scale, Tensor& found_inf,
                               Tensor& norm) override;
  void adamw_step_impl(const AdamWParams& p, Tensor& master, const Tensor& grads, Tensor& m,
                       Tensor& v, Tensor* weights_lowp, const Tensor& step_count,
                       const Tensor* found_inf) override;
  void sgd_step_impl(const SgdParams& p, Tensor& master, const Tensor& grads, Tensor& momentum_buf,
                     Tensor* weights_lowp, const Tensor* found_inf) override;
  void embedding_forward_impl(const EmbeddingGeom& g, const Tensor& tokens, const Tensor& tok_emb,
                              const Tensor& pos_emb, Tensor& y) override;
  void embedding_backward_impl(const EmbeddingGeom& g, const Tensor& tokens, const Tensor& dy,
                               Tensor& dtok_emb, Tensor& dpos_emb, bool add_to_tok) override;
  void maxpool2d_forward_impl(const PoolDesc& d, const Tensor& x, Tensor& y) override;
  void maxpool2d_backward_impl(const PoolDesc& d, const Tensor& x, const Tensor& dy,
                               Tensor& dx) override;

 private:
  // The cached primitive under `key`, made from make()'s primitive_desc on first use.
  Cached& primitive(const std::string& key, const std::function<dnnl::primitive_desc_base()>& make);
  // Runs c.prim with args, its scratchpad added: at `offset` bytes into the workspace, after what
  // the caller keeps there (the caller reserves workspace(offset + c.scratchpad_bytes) first).
  void execute(Cached& c, std::unordered_map<int, dnnl::memory>& args, size_t offset = 0);
  // The weights argument `arg` of c in the layout c's primitive chose, beside their plain layout
  // (`plain` at `data`). Where the two differ the chosen one is a buffer in the workspace after
  // the scratchpads, and the reorder between them (to the chosen layout, or back from it when
  // `out`, for a gradient the primitive writes) is created once and run by reorder_weights.
  // Execute c with offset 0 after this: its scratchpad stays below the buffer.
  struct ChosenWeights {
    dnnl::memory plain, chosen;
    bool reordered = false;
  };
  ChosenWeights chosen_weights(Cached& c, int arg, const dnnl::memory::desc& plain, void* data,
                               bool out);
  void reorder_weights(Cached& c, const ChosenWeights& w, const std::string& key);
  // At least `bytes` of workspace (the provider's, else the backend's own), grown as needed.
  char* workspace(size_t bytes);
  void release_workspace();
  // y = act(pre) elementwise, one dtype, fp32 or bf16 (kernels/onednn/eltwise.cpp).
  void activation_forward(Activation act, const Tensor& pre, Tensor& y);
  // Global average pooling, big (N, HW, C) and small (N, C): forward pools big into small,
  // backward spreads small (dy) over big (dx).
  void avg_pool(bool backward, const Tensor& big, const Tensor& small);
  bool weight_gradient_gemm(const GemmGeom& g, const Tensor& a, const Tensor& b, Tensor& c,
                            const std::string& matmul_impl);
  // TFLOP/s of the best of up to 10 square n x n x n GEMMs per dtype (0 for one oneDNN cannot
  // run), the dtypes taking turns; see the definition.
  std::vector<double> measure_gemms(const std::vector<DType>& types, int64_t n);

  // The parts of a convolution: the filter in oneDNN's layout (reordered from KRSC, or written
  // there and reordered back), around the primitive.
  enum class ConvOp { Forward, BackwardData, BackwardFilter };
  void conv(ConvOp op, const ConvGeom& g, const Tensor& src, const Tensor& w, const Tensor& dst,
            Tensor* dw);

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::unordered_map<std::string, Cached> cache_;
  ConvWorkspaceProvider provider_;
  Tensor work_;                                    // from the provider
  void* own_ = nullptr;                            // without a provider: raw_alloc'd
  size_t work_bytes_ = 0;                          // of either
  std::map<std::string, int64_t> fallback_calls_;  // by op
  std::set<std::string> fell_back_;  // ops on the reference's loops since the choices were dropped
  // An op run on the reference's loops instead (fallback_path): counted, named so for the
  // profiler, where no kernel reads as one of this backend's own loops, and in the run's kernels.
  void fall_back(const char* op) {
    ++fallback_calls_[op];
    fell_back_.insert(op);
    if (last_kernel_.empty()) last_kernel_ = "reference loops";
  }
  bool ceilings_measured_ = false;
  // Whether the vector loops may store bf16 by the CPU's own conversion (parallel.h).
  bool hw_bf16_ = false;
};

}  // namespace mpbench::onednn
