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

}  // namespace mpbench::test
