#include "models/model.h"

#include <algorithm>

#include <fmt/format.h>

#include "kernels/error.h"
#include "models/family.h"
#include "models/linear.h"
#include "models/rng.h"

namespace mpbench {

// ---- ParamStore ---------------------------------------------------------------------------------

int ParamStore::declare(const std::string& name, Shape shape, Init init) {
  total_ = (total_ + kAlign - 1) / kAlign * kAlign;
  params_.push_back(Param{name, shape, total_, init});
  total_ += shape.numel();
  return static_cast<int>(params_.size()) - 1;
}

int64_t ParamStore::count() const {
  int64_t n = 0;
  for (const Param& p : params_) n += p.shape.numel();
  return n;
}

void ParamStore::allocate(TrackingAllocator& alloc, Backend& be, DType compute_dtype,
                          uint64_t seed) {
  const bool amp = compute_dtype != DType::F32;
  master_ = alloc.alloc(Shape{total_}, DType::F32,
                        amp ? MemCategory::MasterWeights : MemCategory::Weights);
  grads_ = alloc.alloc(Shape{total_}, DType::F32, MemCategory::Gradients);
  if (amp) lowp_ = alloc.alloc(Shape{total_}, compute_dtype, MemCategory::Weights);
  if (alloc.counting()) return;  // sizes only: nothing to initialise
  std::vector<float> host(total_);
  uint64_t state = seed;
  // Normal draws have a stream of their own: a parameter's values then do not depend on how many
  // parameters of the other kind of init come before it.
  Rng normal_rng(seed, /*stream=*/7);
  for (const Param& p : params_) {
    for (int64_t i = 0; i < p.shape.numel(); ++i) {
      double v = p.init.value;
      if (p.init.kind == Init::Uniform) {
        double u = static_cast<double>(splitmix64(state) >> 11) * (1.0 / 9007199254740992.0);
        v = (2.0 * u - 1.0) * p.init.value;
      } else if (p.init.kind == Init::Normal) {
        v = p.init.value * normal_rng.normal();
      }
      host[p.offset + i] = static_cast<float>(v);
    }
  }
  be.upload(host.data(), master_);
  be.fill(grads_, 0.0f);
  if (amp) be.cast(master_, lowp_);
}

Tensor ParamStore::weight(int i, DType dt) const {
  if (dt == DType::F32) return master(i);
  MPB_CHECK(lowp_.defined() && lowp_.dtype == dt, "no {} copy of {}", dtype_name(dt),
            params_[i].name);
  return lowp_.slice(params_[i].offset, params_[i].shape);
}

// ---- Model --------------------------------------------------------------------------------------

LayerPrecision layer_precision(Precision p, const std::vector<std::string>& pinned,
                               const std::string& name) {
  if (std::find(pinned.begin(), pinned.end(), name) != pinned.end())
    return LayerPrecision{DType::F32, gemm_math_for(p, DType::F32)};
  const PrecisionInfo& info = precision_info(p);
  return LayerPrecision{info.compute_dtype, gemm_math_for(p, info.compute_dtype), info.fp8_linears};
}

ModelIo model_io(const Spec& spec) {
  return family_of(spec.model).io(spec.model);
}

void preflight(const Spec& spec) {
  for (Precision p : spec.precisions) Model(spec, p);
  if (spec.data.type == "idx") {
    const ModelIo io = model_io(spec);
    try {
      check_idx(spec.data, io.input_dim, static_cast<int>(io.num_classes));
    } catch (const Error& e) {  // which spec's files, where several are given
      if (e.kind() != ErrorKind::BadInput || spec.source_path.empty()) throw;
      throw_bad_input(fmt::format("{}: {}", spec.source_path, e.what()));
    }
  }
  check_dataset_fits(spec);
}

Model::Model(const Spec& spec, Precision precision)
    : precision_(precision), fp8_recipe_(spec.fp8), io_(model_io(spec)) {
  family_of(spec.model).build(spec, precision, layers_);
  validate_fp32_layers(spec, layer_names());
}

std::vector<std::string> Model::layer_names() const {
  std::vector<std::string> names;
  for (const auto& l : layers_) names.push_back(l->name());
  return names;
}

void Model::allocate_params(TrackingAllocator& alloc, Backend& be, uint64_t seed) {
  first_param_.clear();
  for (auto& l : layers_) {
    first_param_.push_back(params_.numel());
    l->declare_params(params_);
  }
  params_.allocate(alloc, be, precision_info(precision_).compute_dtype, seed);
}

void Model::allocate(TrackingAllocator& alloc, Backend& be, int64_t batch, uint64_t seed) {
  allocate_params(alloc, be, seed);
  params_.fp8().allocate(alloc, be, fp8_recipe_);
  DType dt = io_.input_dtype;
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->allocate(alloc, batch, dt, i > 0);  // as backward() asks for dx
    dt = layers_[i]->output_dtype(dt);
  }
  MPB_CHECK(dt == DType::F32, "the model must end in fp32 logits");
  // The loss writes the logits' gradient in the dtype the head's GEMMs use.
  DType head_dtype = layers_.back()->info(DType::F32).compute_dtype;
  dlogits_ = alloc.alloc(Shape{batch * io_.labels_per_sample, io_.num_classes}, head_dtype,
                         MemCategory::Activations);
}

Tensor Model::forward(Backend& be, const Tensor& x) {
  Tensor h = x;
  for (auto& l : layers_) {
    if (observer_) observer_->on_layer(l->name(), false);
    h = l->forward(be, params_, h);
  }
  if (observer_) observer_->on_layer("", false);
  return h;
}

void Model::set_training(bool training) {
  for (auto& l : layers_) l->set_training(training);
}

void Model::backward(Backend& be, const Tensor& dlogits,
                     const std::function<void(int64_t from)>& gradients_ready) {
  Tensor g = dlogits;
  // Between two Linear layers, the activation backward and bias gradient of the lower one ride on
  // the dX GEMM of the upper one (Linear's fused protocol); other layers go one by one.
  bool dz_ready = false;
  for (size_t i = layers_.size(); i-- > 0;) {
    if (observer_) observer_->on_layer(layers_[i]->name(), true);
    auto* lin = dynamic_cast<Linear*>(layers_[i].get());
    if (!lin) {
      g = layers_[i]->backward(be, params_, g, i > 0);
      dz_ready = false;
      if (gradients_ready) gradients_ready(first_param_[i]);
      continue;
    }
    const auto* up = i > 0 ? dynamic_cast<const Linear*>(layers_[i - 1].get()) : nullptr;
    if (up && !lin->can_fuse_upstream(*up)) up = nullptr;
    g = lin->backward(be, params_, g, i > 0, up, dz_ready);
    dz_ready = up != nullptr;
    if (gradients_ready) gradients_ready(first_param_[i]);
  }
  if (observer_) observer_->on_layer("", true);
}

std::vector<std::string> MatmulDims::misaligned(Precision p, int64_t batch) const {
  if (conv) return misaligned_dims(p, {{"C_in", k}, {"C_out", n}});
  // An FP8 Linear runs in FP8 where every size is a multiple of 16, else in bf16 (fp8_gemm_fits):
  // either way only bf16's multiple can be missed.
  return misaligned_dims(p, {{"M", rows(batch)}, {"N", n}, {"K", k}});
}

bool runs_fp8(const LayerInfo& li, int64_t batch) {
  if (!li.fp8_dtypes || !li.matmul) return false;
  const MatmulDims& m = *li.matmul;
  return fp8_gemm_fits(m.rows(batch), m.n, m.k);
}

namespace {
// The FP8 copies in li's activation_bytes that this batch leaves unmade.
int64_t unmade_fp8_bytes(const LayerInfo& li, int64_t batch) {
  if (li.children.empty())
    return li.fp8_copy_bytes > 0 && !runs_fp8(li, batch) ? li.fp8_copy_bytes : 0;
  int64_t n = 0;
  for (const LayerInfo& c : li.children) n += unmade_fp8_bytes(c, batch);
  return n;
}
}  // namespace

int64_t activation_bytes_at(const LayerInfo& li, int64_t batch) {
  return (li.activation_bytes - unmade_fp8_bytes(li, batch)) * batch;
}

void LayerInfo::add_child(LayerInfo child) {
  params += child.params;
  forward_flops += child.forward_flops;
  activation_bytes += child.activation_bytes;
  fp8_copy_bytes += child.fp8_copy_bytes;
  children.push_back(std::move(child));
}

namespace {
// A layer fp32_layers pins to fp32 in a 16-bit mode: the mode's multiple is not its rule.
bool pinned_to_fp32(const LayerInfo& li, Precision p) {
  return li.compute_dtype == DType::F32 && precision_info(p).compute_dtype != DType::F32;
}
}  // namespace

std::vector<std::string> misaligned_sizes(const LayerInfo& li, Precision p, int64_t batch) {
  if (!li.matmul || pinned_to_fp32(li, p)) return {};
  return li.matmul->misaligned(p, batch);
}

namespace {
void collect_misaligned(const LayerInfo& li, const std::string& prefix, Precision p, int64_t batch,
                        std::vector<std::string>& out, int& matmuls, int& pinned, int& off) {
  const std::string name = prefix.empty() ? li.name : prefix + "." + li.name;
  if (li.matmul) ++(pinned_to_fp32(li, p) ? pinned : matmuls);
  const std::vector<std::string> sizes = misaligned_sizes(li, p, batch);
  if (!sizes.empty()) ++off;
  for (const std::string& d : sizes) out.push_back(name + " " + d);
  for (const LayerInfo& c : li.children)
    collect_misaligned(c, name, p, batch, out, matmuls, pinned, off);
}
}  // namespace

std::vector<std::string> misaligned_matmuls(const std::vector<LayerInfo>& infos, Precision p,
                                            int64_t batch, int* matmuls, int* pinned, int* off) {
  std::vector<std::string> out;
  int n = 0, fp32 = 0, misaligned = 0;
  for (const LayerInfo& li : infos) collect_misaligned(li, "", p, batch, out, n, fp32, misaligned);
  if (matmuls) *matmuls = n;
  if (pinned) *pinned = fp32;
  if (off) *off = misaligned;
  return out;
}

std::vector<LayerInfo> Model::layer_infos() const {
  std::vector<LayerInfo> out;
  DType dt = io_.input_dtype;
  for (const auto& l : layers_) {
    out.push_back(l->info(dt));
    dt = l->output_dtype(dt);
  }
  // An output read by the layer's own backward is kept by the next layer as its input unless that
  // layer casts it (a layer fp32_layers pins after a 16-bit one, or the reverse): then it is this
  // layer's to count.
  for (size_t i = 0; i < out.size(); ++i) {
    LayerInfo& li = out[i];
    if (li.backward_reads_output &&
        (i + 1 == out.size() || out[i + 1].compute_dtype != li.storage_dtype))
      li.activation_bytes += li.output_shape.numel() * dtype_size(li.storage_dtype);
  }
  // The data batch a first layer reads as it came (a ResNet's in fp32, or pinned): no layer before
  // counts it. On the layer and its first sublayer, which reads it, so that the sublayers still
  // add up to the layer.
  if (!out.empty() && out.front().input_read_as_is > 0) {
    LayerInfo& first = out.front();
    first.activation_bytes += first.input_read_as_is;
    if (!first.children.empty()) first.children.front().activation_bytes += first.input_read_as_is;
  }
  return out;
}

double Model::forward_flops_per_sample() const {
  double f = 0;
  for (const auto& li : layer_infos()) f += li.forward_flops;
  return f;
}

double Model::training_flops_per_sample() const {
  const std::vector<LayerInfo> infos = layer_infos();
  double f = 0;
  for (const auto& li : infos) f += li.forward_flops;
  return 3 * f - (infos.empty() ? 0 : infos.front().input_flops);
}

}  // namespace mpbench
