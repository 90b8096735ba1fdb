#pragma once
// A whole model on the CPU backend with one batch of inputs and labels, for the model-family
// tests (tests/cpu/models/): the loss recomputed in double from the model's own fp32 logits is the
// function whose central differences the parameter gradients are checked against.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/allocator.h"
#include "models/model.h"
#include "test_util.h"

namespace mpbench::test {

struct ModelHarness {
  std::unique_ptr<Backend> be = make_reference_backend();
  TrackingAllocator alloc{*be};
  Model model;
  int64_t batch;
  int64_t input_dim, labels_per_sample, classes;
  std::vector<int32_t> tokens_host, labels_host;  // tokens: for models reading int32 token ids
  Tensor x, labels, loss, correct;

  ModelHarness(const Spec& spec, Precision p, int64_t batch_, uint64_t seed = 3)
      : model(spec, p), batch(batch_) {
    model.allocate(alloc, *be, batch, seed);
    const ModelIo& io = model.io();
    input_dim = io.input_dim;
    labels_per_sample = io.labels_per_sample;
    classes = io.num_classes;
    const int64_t n_in = batch * input_dim, n_labels = batch * labels_per_sample;
    x = alloc.alloc(Shape{batch, input_dim}, io.input_dtype, MemCategory::Data);
    labels = alloc.alloc(Shape{n_labels}, DType::I32, MemCategory::Data);
    loss = alloc.alloc(Shape{1}, DType::F32, MemCategory::Data);
    correct = alloc.alloc(Shape{1}, DType::F32, MemCategory::Data);
    if (io.input_dtype == DType::I32) {
      for (int64_t i = 0; i < n_in; ++i)
        tokens_host.push_back(static_cast<int32_t>((i * 5 + 3 + i / 7) % classes));
      upload_tokens();
    } else {
      from_host_f32(*be, random_nonzero(static_cast<size_t>(n_in), seed + 1), x);
    }
    for (int64_t i = 0; i < n_labels; ++i)
      labels_host.push_back(static_cast<int32_t>((i * 7 + 1) % classes));
    be->upload(labels_host.data(), labels);
  }
  void upload_tokens() { be->upload(tokens_host.data(), x); }

  // Logits of the first `rows` samples: (rows * labels_per_sample, classes).
  std::vector<float> logits(int64_t rows) {
    Tensor out = model.forward(*be, x.slice(0, Shape{rows, input_dim}));
    return to_host_f32(*be, out);
  }
  // Mean cross-entropy over every label of the batch, from the model's fp32 logits, in double.
  double loss_value() {
    const std::vector<float> z = logits(batch);
    const int64_t n = batch * labels_per_sample, k = classes;
    double total = 0;
    for (int64_t i = 0; i < n; ++i) {
      double mx = -1e300;
      for (int64_t j = 0; j < k; ++j) mx = std::max(mx, double{z[i * k + j]});
      double se = 0;
      for (int64_t j = 0; j < k; ++j) se += std::exp(z[i * k + j] - mx);
      total += std::log(se) + mx - z[i * k + labels_host[i]];
    }
    return total / static_cast<double>(n);
  }
  // One forward and backward; returns the fp32 parameter gradients.
  std::vector<float> gradients() {
    Tensor z = model.forward(*be, x);
    be->fill(loss, 0.0f);
    be->fill(correct, 0.0f);
    be->softmax_xent(z, labels, &model.dlogits_buffer(), nullptr, loss, correct);
    model.backward(*be, model.dlogits_buffer());
    return to_host_f32(*be, model.params().grads_flat());
  }
};

// Model::backward against central differences of the model's own fp32 loss (fp32, this batch),
// for every parameter: each parameter tensor's gradient within 2% (relative L2) of them, so that
// no part of the model hides in the total. The step, 0.2% of the weight, keeps both ReLU-kink and
// fp32 rounding errors under 0.6% per tensor; a missing gradient path or activation mask gives
// errors of 50% and more.
inline void expect_gradients_match_central_differences(const Spec& spec, int64_t batch = 4) {
  ModelHarness h(spec, Precision::FP32, batch);
  const std::vector<float> grads = h.gradients();
  ParamStore& ps = h.model.params();
  std::vector<float> w = to_host_f32(*h.be, ps.master_flat());
  ASSERT_EQ(grads.size(), w.size());
  const double base = h.loss_value();
  ASSERT_TRUE(std::isfinite(base));
  std::vector<double> fd(w.size());
  for (size_t i = 0; i < w.size(); ++i) {
    const float w0 = w[i];
    const float step = 2e-3f * std::max(std::fabs(w0), 0.1f);
    w[i] = w0 + step;
    h.be->upload(w.data(), ps.master_flat());
    const double up = h.loss_value();
    w[i] = w0 - step;
    h.be->upload(w.data(), ps.master_flat());
    const double down = h.loss_value();
    w[i] = w0;
    fd[i] = (up - down) / (2.0 * static_cast<double>(step));
  }
  h.be->upload(w.data(), ps.master_flat());
  for (const auto& p : ps.params()) {
    double err = 0, ref = 0;
    for (int64_t i = p.offset; i < p.offset + p.shape.numel(); ++i) {
      err += (grads[i] - fd[i]) * (grads[i] - fd[i]);
      ref += fd[i] * fd[i];
    }
    EXPECT_GT(ref, 0) << p.name;
    EXPECT_LT(std::sqrt(err / ref), 0.02) << p.name << ": |g - fd| / |fd|";
  }
}

}  // namespace mpbench::test
