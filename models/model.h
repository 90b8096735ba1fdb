#pragma once
// Layers and models. A model is built once per precision mode: it declares its parameters and
// activation buffers for a fixed batch size, all from the run's TrackingAllocator, and runs
// forward/backward through the Backend op interface. It knows nothing of optimizers or loops.
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "models/fp8_scaling.h"
#include "models/shared_scratch.h"
#include "models/spec.h"

namespace mpbench {

// All parameters of a model in three flat buffers, so that the ops touching every parameter
// (unscale/check/norm, optimizer) run as one pass:
//   master  fp32            MasterWeights in AMP modes, Weights otherwise
//   lowp    compute dtype   Weights (AMP modes only): the copies used in math, written by the
//   optimizer grads   fp32            Gradients
class ParamStore {
 public:
  // How a parameter starts: PyTorch's defaults per layer kind.
  struct Init {
    enum Kind { Uniform, Constant, Normal } kind = Uniform;
    float value = 0;  // Uniform: bound of U(-b, b); Constant: the value; Normal: the std of N(0, s)
    static Init uniform(float bound) { return {Uniform, bound}; }
    static Init constant(float v) { return {Constant, v}; }
    static Init normal(float std) { return {Normal, std}; }
  };
  struct Param {
    std::string name;  // "fc1.weight"
    Shape shape;
    int64_t offset = 0;
    Init init;
  };
  // Declaration phase: returns the index of the parameter.
  int declare(const std::string& name, Shape shape, Init init);
  int declare(const std::string& name, Shape shape, float init_bound) {
    return declare(name, shape, Init::uniform(init_bound));
  }
  // Allocates the flat buffers and initialises master (and lowp) deterministically from seed; a
  // counting allocator (TrackingAllocator::Mode::Count) only counts them.
  void allocate(TrackingAllocator& alloc, Backend& be, DType compute_dtype, uint64_t seed);

  const std::vector<Param>& params() const { return params_; }
  // The flat buffers' length: the parameters and the padding between them (kAlign).
  int64_t numel() const { return total_; }
  // The number of parameters.
  int64_t count() const;
  // Views of one parameter. weight(i, dt): the tensor used in math for operand dtype dt.
  Tensor master(int i) const { return master_.slice(params_[i].offset, params_[i].shape); }
  Tensor grad(int i) const { return grads_.slice(params_[i].offset, params_[i].shape); }
  Tensor weight(int i, DType dt) const;

  // The delayed-scaling state of the FP8 tensors (amp_fp8): declared with the parameters,
  // allocated by the Model.
  Fp8Scaling& fp8() { return fp8_; }
  const Fp8Scaling& fp8() const { return fp8_; }
  // The FP8 copies a Linear holds only while its GEMMs run, one set for the model's layers
  // (Linear: x in the forward; dY and dY^T in the backward). Shared, so that a layer's handle
  // outlives a move of the store.
  const std::shared_ptr<GrowingScratch>& fp8_scratch() const { return fp8_scratch_; }

  Tensor& master_flat() { return master_; }
  Tensor& grads_flat() { return grads_; }
  Tensor* lowp_flat() { return lowp_.defined() ? &lowp_ : nullptr; }

 private:
  // Each parameter starts on a multiple of 16 elements (64 bytes of fp32, 32 of bf16): cuBLASLt
  // wants 16-byte aligned pointers for FP8 GEMM outputs and for fused bias epilogues, and a
  // 10-float bias before them would otherwise misalign every later slice. The gaps stay zero.
  static constexpr int64_t kAlign = 16;
  std::vector<Param> params_;
  int64_t total_ = 0;
  Tensor master_, lowp_, grads_;
  Fp8Scaling fp8_;
  std::shared_ptr<GrowingScratch> fp8_scratch_ = std::make_shared<GrowingScratch>(2);
};

// The GEMM a sublayer runs, for the tensor-core alignment check: M x N outputs over K. A
// convolution is checked by its channels, as cuDNN's rule is: C_in (k here) and C_out (n).
struct MatmulDims {
  bool conv = false;
  int64_t m = 0;             // rows per sample (times the batch), or per GEMM when !m_per_sample
  bool m_per_sample = true;  // false: a batched GEMM per sample and head (attention), M fixed
  int64_t n = 0, k = 0;
  bool fp8 = false;  // the GEMM runs in FP8 (amp_fp8's Linear layers): sizes in 16s
  // M at this batch.
  int64_t rows(int64_t batch) const { return m_per_sample ? m * batch : m; }
  // The sizes misaligned for mode p (misaligned_dims in kernels/precision.h) at this batch.
  std::vector<std::string> misaligned(Precision p, int64_t batch) const;
};

// What `mpbench inspect` prints per layer.
struct LayerInfo {
  std::string name;
  std::string kind;    // "linear+relu", ...
  Shape output_shape;  // per sample
  int64_t params = 0;
  double forward_flops = 0;  // per sample
  // Per sample, of forward_flops: the GEMMs and convolutions that read the layer's own input,
  // whose input gradient the model's first layer never computes (training_flops_per_sample).
  double input_flops = 0;
  DType compute_dtype = DType::F32;  // operands of the GEMM / conv
  DType storage_dtype = DType::F32;  // dtype of the output activation
  // amp_fp8: the GEMMs' input dtypes when they run in FP8, forward (fp8_e4m3 activations and
  // weights) and backward (fp8_e5m2 gradients); absent otherwise.
  std::optional<std::array<DType, 2>> fp8_dtypes;
  int64_t activation_bytes = 0;  // per sample, saved for backward (inputs, pre-activations)
  // ReLU's backward reads the layer's output, which the next layer keeps as its input only when it
  // takes it in the same dtype (Model::layer_infos counts it here otherwise).
  bool backward_reads_output = false;
  // Per sample, of activation_bytes: the FP8 copies kept for the backward (amp_fp8's Linear: x^T),
  // which exist only at a batch whose GEMMs run in FP8 (activation_bytes_at).
  int64_t fp8_copy_bytes = 0;
  // Per sample: the input as it came, which this layer's backward reads and the layer before
  // counts as its output (a ResNet block's or stem's); Model::layer_infos counts it for the first
  // layer, which has none before it (the data batch).
  int64_t input_read_as_is = 0;
  std::optional<MatmulDims> matmul;  // a GEMM or convolution without sublayers
  // The sublayers (names relative to this layer), in the order they run; a layer that has them
  // takes its params, FLOPs and activation bytes as their sums (add_child).
  std::vector<LayerInfo> children;
  void add_child(LayerInfo child);
};

// amp_fp8: whether li's GEMMs take FP8 inputs at this batch: an FP8 Linear (fp8_dtypes) whose M
// (the batch's rows), N and K are all multiples of 16 (fp8_gemm_fits); at another batch its
// GEMMs run in bf16.
bool runs_fp8(const LayerInfo& li, int64_t batch);
// What li keeps for its backward at this batch, in bytes: activation_bytes less the FP8 copies of
// the (sub)layers whose GEMMs run in bf16 at this batch.
int64_t activation_bytes_at(const LayerInfo& li, int64_t batch);

// What of li's own GEMM or convolution is off mode p's tensor-core multiple at this batch ("N=4");
// nothing for a layer without one, or for one fp32_layers pins to fp32 in a 16-bit mode (the
// mode's multiple is not its rule).
std::vector<std::string> misaligned_sizes(const LayerInfo& li, Precision p, int64_t batch);

// Every GEMM and convolution of `infos` and their sublayers whose sizes are off mode p's
// tensor-core multiple at this batch, one entry per size, as "stem.conv C_in=3". *matmuls, when
// given, is set to how many GEMMs and convolutions are held to that rule, *pinned to how many
// fp32_layers keeps out of it, *off to how many have a size in the list. inspect flags them,
// explain too.
std::vector<std::string> misaligned_matmuls(const std::vector<LayerInfo>& infos, Precision p,
                                            int64_t batch, int* matmuls = nullptr,
                                            int* pinned = nullptr, int* off = nullptr);

// Per-layer precision: the mode's compute dtype, or fp32 for a layer pinned by fp32_layers.
struct LayerPrecision {
  DType compute = DType::F32;
  GemmMath math = GemmMath::Strict;
  bool fp8 = false;  // amp_fp8, not pinned: a Linear's GEMMs take FP8 inputs where they fit
};
LayerPrecision layer_precision(Precision p, const std::vector<std::string>& fp32_layers,
                               const std::string& layer_name);

class Layer {
 public:
  virtual ~Layer() = default;
  const std::string& name() const { return name_; }
  virtual void declare_params(ParamStore& ps) = 0;
  // Allocates activation buffers for `batch` rows; input dtype is what forward() will receive.
  // need_dx: backward() will be asked for the input's gradient (false for the first layer, whose
  // input is the data): without it no input-gradient buffer is allocated.
  virtual void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype,
                        bool need_dx) = 0;
  // x: (rows <= batch, ...). Returns a view of the output for the same rows.
  virtual Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x) = 0;
  // dy: gradient of the output (dtype of the output), the layer's to consume: it may write over
  // it. Writes parameter gradients (overwrite) and returns dx in the input's dtype, unless
  // need_dx is false.
  virtual Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool need_dx) = 0;
  virtual LayerInfo info(DType input_dtype) const = 0;
  virtual DType output_dtype(DType input_dtype) const = 0;
  // Training (batch statistics, the default) or evaluation (running statistics) behaviour, for
  // the layers where they differ (batchnorm).
  virtual void set_training(bool training) { training_ = training; }

 protected:
  explicit Layer(std::string name) : name_(std::move(name)) {}
  std::string name_;
  bool training_ = true;
};

// What a model family reads and predicts per sample.
struct ModelIo {
  DType input_dtype = DType::F32;  // F32 features / pixels, or I32 token ids
  int64_t input_dim = 0;           // inputs per sample (features, H*W*C pixels, seq_len tokens)
  int64_t labels_per_sample = 1;   // 1 for classification, seq_len for next-token prediction
  int64_t num_classes = 0;         // classes, or the vocabulary
};
ModelIo model_io(const Spec& spec);

// Everything a command would refuse about a parsed spec before its first step, without
// allocating or training: each mode's model is built as a description (fp32_layers names that
// only the built layers know) and the idx files are read but for their pixels (headers, sizes,
// counts, labels). Commands call it on every spec before any work, so that no spec's training is
// thrown away for a later spec's mistake. Errors are BadInput naming the file, and an
// out-of-memory Error for a dataset the host cannot hold (check_dataset_fits).
void preflight(const Spec& spec);

// Told which layer is about to run, by tools that attribute device time to layers
// (`mpbench profile`). Called on the host as the layer's ops are enqueued.
class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  // layer: the layer's name; "" once the model's forward or backward pass is over.
  virtual void on_layer(const std::string& layer, bool backward) = 0;
};

// A sequential model ending in fp32 logits (batch * labels_per_sample, num_classes).
class Model {
 public:
  Model(const Spec& spec, Precision precision);
  // Allocates parameters and activations; after this, forward/backward may run.
  void allocate(TrackingAllocator& alloc, Backend& be, int64_t batch, uint64_t seed);
  // The parameters alone (declared, allocated, initialised from seed as allocate does): what
  // `mpbench data --params` writes, so that another framework can start from the same weights.
  void allocate_params(TrackingAllocator& alloc, Backend& be, uint64_t seed);

  // x: (rows, input_dim) rows of the dataset in io().input_dtype. Returns fp32 logits
  // (rows * labels_per_sample, classes).
  Tensor forward(Backend& be, const Tensor& x);
  // Batch statistics while training, running statistics for evaluation (see Layer).
  void set_training(bool training);
  // dlogits: the buffer from dlogits_buffer(), filled by the loss. gradients_ready, when given,
  // is called after each layer's backward with the offset in the flat gradients from which on
  // every gradient is final (that layer's first parameter: no layer below writes above its own),
  // so that data parallel can start reducing them while the layers below run.
  void backward(Backend& be, const Tensor& dlogits,
                const std::function<void(int64_t from)>& gradients_ready = nullptr);
  // Where the loss writes the logits' gradient: (batch * labels_per_sample, classes) in the
  // head's compute dtype.
  Tensor& dlogits_buffer() { return dlogits_; }

  // Not owned; nullptr (the default) for none.
  void set_observer(LayerObserver* observer) { observer_ = observer; }

  ParamStore& params() { return params_; }
  std::vector<LayerInfo> layer_infos() const;
  std::vector<std::string> layer_names() const;
  Precision precision() const { return precision_; }
  const ModelIo& io() const { return io_; }
  int64_t num_classes() const { return io_.num_classes; }
  // Forward FLOPs per sample (training counts 3x: forward, and backward's two GEMMs per layer).
  double forward_flops_per_sample() const;
  // A training step's: forward, weight gradient and input gradient of every GEMM and
  // convolution (3x the forward), less the input gradient the first layer does not compute
  // (its GEMMs that read the data: it was counted, and mnist_mlp's fp32 run read 113% of the
  // native CPU's measured peak).
  double training_flops_per_sample() const;
  // amp_fp8, after each optimizer step: the delayed-scaling update of every FP8 tensor.
  void update_fp8_scaling(Backend& be) { params_.fp8().update(be); }

 private:
  Precision precision_;
  DelayedScalingRecipe fp8_recipe_;
  ModelIo io_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<int64_t> first_param_;  // per layer: the flat offset its parameters start at
  ParamStore params_;
  Tensor dlogits_;
  LayerObserver* observer_ = nullptr;
};

}  // namespace mpbench
