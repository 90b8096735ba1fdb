// The transformer family on the CPU backend: layer names, FLOP and parameter counts against the
// formulas of the issue (24 d^2 + 4 s d per token, causal 2 s d), Model::backward against central
// differences of the model's own fp32 loss (causal and not), the causal mask, partial batches,
// the AMP paths against fp32, and the synthetic sequence task (deterministic, labels as defined,
// and not solvable from (token, position) alone).
#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "model_harness.h"
#include "models/dataset.h"
#include "models/model.h"
#include "models/synthetic_sequences.h"
#include "models/transformer.h"
#include "test_util.h"

namespace mpbench {
namespace {

Spec transformer_spec(int64_t d, int64_t heads, int64_t ffn, int64_t seq, int64_t layers,
                      int64_t vocab, bool causal, bool tied = false) {
  Spec s;
  s.name = "t";
  s.family = "transformer";
  TransformerSpec t;
  t.d_model = d;
  t.heads = heads;
  t.ffn_dim = ffn;
  t.seq_len = seq;
  t.layers = layers;
  t.vocab_size = vocab;
  t.causal = causal;
  t.tie_embeddings = tied;
  s.model = t;
  return s;
}

using Harness = test::ModelHarness;

TEST(Transformer, LayerNamesKindsAndDtypes) {
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_transformer.json");
  const auto& t = std::get<TransformerSpec>(spec.model);
  Model m(spec, Precision::AMP_BF16);
  std::vector<std::string> names{"embedding"};
  for (int64_t i = 1; i <= t.layers; ++i) names.push_back("layer" + std::to_string(i));
  names.push_back("final_norm");
  names.push_back("head");
  EXPECT_EQ(m.layer_names(), names);
  const ModelIo& io = m.io();
  EXPECT_EQ(io.input_dtype, DType::I32);
  EXPECT_EQ(io.labels_per_sample, t.seq_len);
  const auto infos = m.layer_infos();
  EXPECT_EQ(infos[1].kind, t.causal ? "decoder" : "encoder");
  EXPECT_EQ(infos[1].output_shape, (Shape{t.seq_len, t.d_model}));
  EXPECT_EQ(infos[1].compute_dtype, DType::BF16);
  EXPECT_EQ(infos[1].storage_dtype, DType::F32);  // the residual stream
  EXPECT_EQ(infos[0].storage_dtype, DType::F32);
  EXPECT_EQ(infos.end()[-2].storage_dtype, DType::BF16);  // the final norm feeds the head's GEMM
  EXPECT_EQ(infos.back().output_shape, (Shape{t.seq_len, t.vocab_size}));
  EXPECT_EQ(infos.back().compute_dtype, DType::BF16);
  EXPECT_EQ(infos.back().storage_dtype, DType::F32);
  // 16-bit activations save less than fp32 ones.
  Model f(spec, Precision::FP32);
  EXPECT_LT(infos[1].activation_bytes, f.layer_infos()[1].activation_bytes);

  // Pinning the head keeps the final norm's output and the head's GEMM in fp32.
  Spec pinned = spec;
  pinned.fp32_layers = {"head", "layer1"};
  Model p(pinned, Precision::AMP_FP16);
  const auto pi = p.layer_infos();
  EXPECT_EQ(pi[1].compute_dtype, DType::F32);
  EXPECT_EQ(pi[2].compute_dtype, DType::F16);
  EXPECT_EQ(pi.end()[-2].storage_dtype, DType::F32);
  EXPECT_EQ(pi.back().compute_dtype, DType::F32);
  pinned.fp32_layers = {"layer9"};
  EXPECT_THROW(Model(pinned, Precision::AMP_FP16), Error);
}

// Forward FLOPs per token per layer: 24 d^2 + 4 s d with ffn = 4 d; under the causal mask the
// attention GEMMs count the s(s+1)/2 unmasked scores, 2 (s + 1) d a token. Head: 2 d V per token.
TEST(Transformer, FlopsMatchTheFormula) {
  for (const char* file : {"bert_base_layer", "gpt2_small_layer"}) {
    const Spec spec = load_spec(test::source_dir() + "/configs/" + file + ".json");
    const auto& t = std::get<TransformerSpec>(spec.model);
    ASSERT_EQ(t.ffn_dim, 4 * t.d_model) << file;
    const double d = t.d_model, s = t.seq_len;
    const double per_token = 24 * d * d + (t.causal ? 2 * (s + 1) : 4 * s) * d;
    Model m(spec, Precision::AMP_FP16);
    const auto infos = m.layer_infos();
    ASSERT_EQ(infos.size(), static_cast<size_t>(t.layers + 3)) << file;
    EXPECT_DOUBLE_EQ(infos[1].forward_flops, per_token * s) << file;
    EXPECT_DOUBLE_EQ(infos.back().forward_flops, 2 * d * t.vocab_size * s) << file;
    EXPECT_DOUBLE_EQ(m.forward_flops_per_sample(),
                     t.layers * per_token * s + 2 * d * t.vocab_size * s)
        << file;
  }
  // The literal numbers: BERT-base at 512 tokens, GPT-2 small at 1024 (causal).
  const Spec bert = load_spec(test::source_dir() + "/configs/bert_base_layer.json");
  EXPECT_DOUBLE_EQ(Model(bert, Precision::FP32).layer_infos()[1].forward_flops,
                   512.0 * (24.0 * 768 * 768 + 4.0 * 512 * 768));  // 8.05 GFLOP per sample
  const Spec gpt = load_spec(test::source_dir() + "/configs/gpt2_small_layer.json");
  EXPECT_DOUBLE_EQ(Model(gpt, Precision::FP32).layer_infos()[1].forward_flops,
                   1024.0 * (24.0 * 768 * 768 + 2.0 * 1025 * 768));  // 16.1 GFLOP per sample
  // At one token nothing is masked: causal counts as much as bidirectional.
  for (bool causal : {false, true}) {
    const Spec one = transformer_spec(32, 2, 128, 1, 1, 10, causal);
    EXPECT_DOUBLE_EQ(Model(one, Precision::FP32).layer_infos()[1].forward_flops,
                     24.0 * 32 * 32 + 4.0 * 32)
        << causal;
  }
}

TEST(Transformer, ParameterCount) {
  const Spec spec = transformer_spec(24, 3, 96, 10, 2, 13, false);
  Harness h(spec, Precision::FP32, 2);
  const int64_t d = 24, f = 96, s = 10, v = 13;
  // Per layer: 2 LayerNorms, QKV, projection, FFN (weights and biases) = 12 d^2 + 13 d at f = 4d.
  const int64_t layer = 4 * d + 3 * d * d + 3 * d + d * d + d + 2 * d * f + f + d;
  EXPECT_EQ(layer, 12 * d * d + 13 * d);
  const int64_t total = (v + s) * d + 2 * layer + 2 * d + d * v + v;
  EXPECT_EQ(h.model.params().count(), total);
  int64_t from_infos = 0;
  for (const auto& li : h.model.layer_infos()) from_infos += li.params;
  EXPECT_EQ(from_infos, total);
  // Initialisation: LayerNorm gamma 1 and beta 0, embeddings N(0, 0.02).
  const ParamStore& ps = h.model.params();
  for (size_t i = 0; i < ps.params().size(); ++i) {
    const auto& p = ps.params()[i];
    const std::vector<float> w = test::to_host_f32(*h.be, ps.master(static_cast<int>(i)));
    // 16-element starts (cuBLASLt's 16-byte rule for FP8 outputs and bias epilogues), although
    // the 13-wide head bias and the 13 x 24 table are not multiples of 16.
    EXPECT_EQ(p.offset % 16, 0) << p.name;
    if (p.name == "layer1.ln1.gamma") EXPECT_EQ(w, std::vector<float>(d, 1.0f));
    if (p.name == "layer2.ln2.beta") EXPECT_EQ(w, std::vector<float>(d, 0.0f));
    if (p.name == "embedding.token") {
      double sq = 0;
      for (float x : w) sq += double{x} * x;
      EXPECT_NEAR(std::sqrt(sq / w.size()), 0.02, 0.004);
    }
  }
}

// Tied: the head has no parameter of its own; the token table serves as both.
TEST(Transformer, TiedParameterCount) {
  const Spec spec = transformer_spec(24, 3, 96, 10, 2, 13, true, /*tied=*/true);
  Harness h(spec, Precision::FP32, 2);
  const int64_t d = 24, s = 10, v = 13, layer = 12 * d * d + 13 * d;
  const int64_t total = (v + s) * d + 2 * layer + 2 * d;
  EXPECT_EQ(h.model.params().count(), total);
  int64_t from_infos = 0;
  for (const auto& li : h.model.layer_infos()) from_infos += li.params;
  EXPECT_EQ(from_infos, total);
  for (const auto& p : h.model.params().params())
    EXPECT_EQ(p.name.rfind("head", 0), std::string::npos) << p.name;
  EXPECT_EQ(h.model.layer_infos().back().kind, "linear (tied to embedding)");
}

// The shipped whole networks: GPT-2 small (tied) and BERT-base's 12 encoder layers.
TEST(Transformer, Gpt2SmallAndBertBaseParameterCounts) {
  auto params = [](const Model& m, const std::string& prefix) {
    int64_t n = 0;
    for (const auto& li : m.layer_infos())
      if (prefix.empty() || li.name.rfind(prefix, 0) == 0) n += li.params;
    return n;
  };
  const Spec gpt = load_spec(test::source_dir() + "/configs/gpt2_small.json");
  const Model g(gpt, Precision::FP32);
  EXPECT_EQ(params(g, ""), 124439808);
  EXPECT_EQ(params(g, "layer"), 12 * 7087872);
  EXPECT_TRUE(std::get<TransformerSpec>(gpt.model).tie_embeddings);
  const Spec bert = load_spec(test::source_dir() + "/configs/bert_base.json");
  const Model b(bert, Precision::FP32);
  EXPECT_EQ(params(b, "layer"), 85054464);
  for (const auto& li : b.layer_infos())
    if (li.name.rfind("layer", 0) == 0) EXPECT_EQ(li.params, 7087872) << li.name;
  EXPECT_EQ(b.layer_infos().size(), 15u);  // embedding, 12 layers, final_norm, head
}

// Model::backward's gradient of every parameter against central differences of the loss, using
// the model's own fp32 forward. Two layers, two heads, a partial-looking vocabulary. Tied, the
// token table's gradient is the head's dW plus the embedding's.
void check_gradients(bool causal, bool tied = false) {
  const Spec spec = transformer_spec(8, 2, 16, 6, 2, 7, causal, tied);
  Harness h(spec, Precision::FP32, 3);
  const std::vector<float> grads = h.gradients();
  ParamStore& ps = h.model.params();
  std::vector<float> master = test::to_host_f32(*h.be, ps.master_flat());
  const double step = 2e-3;
  for (const auto& p : ps.params()) {
    std::vector<float> fd(static_cast<size_t>(p.shape.numel())), got(fd.size());
    for (int64_t i = 0; i < p.shape.numel(); ++i) {
      const size_t at = static_cast<size_t>(p.offset + i);
      const float keep = master[at];
      master[at] = keep + static_cast<float>(step);
      h.be->upload(master.data(), ps.master_flat());
      const double up = h.loss_value();
      master[at] = keep - static_cast<float>(step);
      h.be->upload(master.data(), ps.master_flat());
      const double down = h.loss_value();
      master[at] = keep;
      fd[i] = static_cast<float>((up - down) / (2 * step));
      got[i] = grads[at];
    }
    h.be->upload(master.data(), ps.master_flat());
    const auto c = test::compare(got, fd, 1e-2);
    EXPECT_TRUE(c.ok) << p.name << (causal ? " (causal)" : "") << (tied ? " (tied)" : "") << ": "
                      << c.message << " rel error " << c.rel_error;
  }
}

TEST(Transformer, GradientsMatchCentralDifferences) {
  check_gradients(false);
}
TEST(Transformer, CausalGradientsMatchCentralDifferences) {
  check_gradients(true);
}
TEST(Transformer, TiedGradientsMatchCentralDifferences) {
  check_gradients(true, /*tied=*/true);
}

// With the causal mask, position t's logits do not depend on later tokens; without it they do.
TEST(Transformer, CausalMaskHidesTheFuture) {
  for (bool causal : {true, false}) {
    const Spec spec = transformer_spec(8, 2, 16, 6, 2, 7, causal);
    Harness h(spec, Precision::FP32, 2);
    const std::vector<float> before = h.logits(2);
    h.tokens_host[4] = (h.tokens_host[4] + 1) % 7;  // sample 0, position 4
    h.upload_tokens();
    const std::vector<float> after = h.logits(2);
    const int64_t v = 7;
    for (int64_t pos = 0; pos < 6; ++pos) {
      bool same = true;
      for (int64_t j = 0; j < v; ++j) same &= before[pos * v + j] == after[pos * v + j];
      if (causal)
        EXPECT_EQ(same, pos < 4) << "causal, position " << pos;
      else
        EXPECT_FALSE(same) << "bidirectional, position " << pos;
    }
    // Sample 1 is untouched either way.
    EXPECT_TRUE(std::equal(before.begin() + 6 * v, before.end(), after.begin() + 6 * v));
  }
}

// A partial batch (the eval tail) gives the same logits as those rows of a full one.
TEST(Transformer, PartialBatchMatchesFullBatch) {
  const Spec spec = transformer_spec(8, 2, 16, 6, 1, 7, false);
  Harness h(spec, Precision::FP32, 3);
  const std::vector<float> full = h.logits(3);
  const std::vector<float> part = h.logits(2);
  ASSERT_EQ(part.size(), 2u * 6 * 7);
  for (size_t i = 0; i < part.size(); ++i) EXPECT_FLOAT_EQ(part[i], full[i]) << i;
}

// The AMP modes compute the same gradients as fp32, to 16-bit accuracy.
TEST(Transformer, AmpGradientsFollowFp32) {
  const Spec spec = transformer_spec(16, 2, 32, 8, 2, 11, true);
  Harness ref(spec, Precision::FP32, 4);
  const std::vector<float> g32 = ref.gradients();
  for (Precision p : {Precision::AMP_FP16, Precision::AMP_BF16, Precision::TF32}) {
    Harness h(spec, p, 4);
    const std::vector<float> g = h.gradients();
    const double tol = p == Precision::AMP_BF16 ? 3e-2 : 5e-3;  // measured 6.7e-3, 1.2e-3
    const auto c = test::compare(g, g32, tol);
    EXPECT_TRUE(c.ok) << precision_name(p) << ": " << c.message << " rel error " << c.rel_error;
    EXPECT_GT(c.rel_error, 0.0) << precision_name(p) << " should round somewhere";
  }
  // Pinned layers mix fp32 and fp16 GEMMs (and the casts between them) in one model.
  Spec pinned = spec;
  pinned.fp32_layers = {"layer1", "final_norm"};
  Harness h(pinned, Precision::AMP_FP16, 4);
  const auto c = test::compare(h.gradients(), g32, 5e-3);  // measured 7e-4
  EXPECT_TRUE(c.ok) << "pinned: " << c.message << " rel error " << c.rel_error;
  // The pinned final norm writes fp32 (the head casts it), not the head's 16 bits.
  Spec norm_only = spec;
  norm_only.fp32_layers = {"final_norm"};
  for (const LayerInfo& li : Model(norm_only, Precision::AMP_BF16).layer_infos())
    if (li.name == "final_norm") EXPECT_EQ(li.storage_dtype, DType::F32);
  // Tied: the head's GEMMs read the table's 16-bit copy, the embedding its fp32 master.
  const Spec tied = transformer_spec(16, 2, 32, 8, 2, 11, true, /*tied=*/true);
  Harness tref(tied, Precision::FP32, 4);
  const std::vector<float> t32 = tref.gradients();
  for (Precision p : {Precision::AMP_FP16, Precision::AMP_BF16}) {
    Harness ht(tied, p, 4);
    const auto ct = test::compare(ht.gradients(), t32, p == Precision::AMP_BF16 ? 3e-2 : 5e-3);
    EXPECT_TRUE(ct.ok) << "tied " << precision_name(p) << ": " << ct.message << " rel error "
                       << ct.rel_error;
  }
}

// Autocast's softmax keeps its fp32 output for the backward; only the GEMM with v reads a 16-bit
// copy. With one token at every position and no position embedding, every key has the same value,
// the attention output does not depend on the probabilities, and the scores' gradient, p (c - c
// sum p) per row, is 0 to fp32 rounding; computed from 16-bit probabilities (rows of 1/12, 1/7...
// that do not add to 1 once rounded) it is a few 2^-9 of c. So q's and k's gradients vanish next
// to v's.
TEST(Transformer, AttentionBackwardReadsFp32Probabilities) {
  for (bool causal : {false, true})
    for (Precision p : {Precision::AMP_BF16, Precision::AMP_FP16}) {
      SCOPED_TRACE(std::string(precision_name(p)) + (causal ? " causal" : ""));
      const int64_t d = 16;
      Harness h(transformer_spec(d, 2, 32, 12, 1, 11, causal), p, 2);
      std::fill(h.tokens_host.begin(), h.tokens_host.end(), 5);
      h.upload_tokens();
      ParamStore& ps = h.model.params();
      const auto find = [&](const std::string& name) {
        for (size_t i = 0; i < ps.params().size(); ++i)
          if (ps.params()[i].name == name) return static_cast<int>(i);
        ADD_FAILURE() << "no parameter " << name;
        return 0;
      };
      Tensor pos = ps.master(find("embedding.position"));
      h.be->fill(pos, 0.0f);
      const std::vector<float> grads = h.gradients();
      // qkv's weight is (3 d, d): q's rows, then k's, then v's.
      const int64_t at = ps.params()[static_cast<size_t>(find("layer1.qkv.weight"))].offset;
      double qk = 0, v = 0;
      for (int64_t i = 0; i < 3 * d * d; ++i) {
        const double g = grads[static_cast<size_t>(at + i)];
        (i < 2 * d * d ? qk : v) += g * g;
      }
      ASSERT_GT(v, 0.0);
      // Measured 0 to 4.5e-9; reading 16-bit probabilities gave 7e-5 to 1.1e-3.
      EXPECT_LT(std::sqrt(qk / v), 1e-6);
    }
}

// The scores live in fc1's output and pre-activation block where they fit (2 x ffn >= heads x
// seq per token), else in the scratch's big buffer, and the backward's dP where they were. Both
// train to the loss's gradients: scores larger than fc1's block (2 heads x 6 positions against
// 2 x 4), and scores filling it exactly (2 x 8 = 2 heads x 8), larger than the big buffer (3 x
// d_model 4 per token).
TEST(Transformer, ScoresTrainInFc1sBlockOrInTheScratch) {
  test::expect_gradients_match_central_differences(transformer_spec(8, 2, 4, 6, 2, 7, false), 3);
  test::expect_gradients_match_central_differences(transformer_spec(4, 2, 8, 8, 1, 7, false), 3);
}

// The embedding's backward reads the token ids it was given: int32, 4 bytes a position, whatever
// the mode.
TEST(Transformer, TheEmbeddingKeepsItsInt32TokenIds) {
  const Spec spec = transformer_spec(16, 2, 32, 8, 1, 11, false);
  for (Precision p : {Precision::FP32, Precision::AMP_BF16})
    EXPECT_EQ(Model(spec, p).layer_infos()[0].activation_bytes, 8 * 4) << precision_name(p);
}

// What a one-layer fp32 model allocates for its activations, buffer by buffer (tokens x d_model
// fp32 "stream" units): in fp32 the gradient entering a branch is the stream gradient itself, so
// the scratch the layers share holds no copy of it (AMP modes keep a 16-bit one).
TEST(Transformer, Fp32ActivationsHoldNoCopyOfTheBranchGradient) {
  const int64_t batch = 4, s = 64, d = 32, tokens = batch * s;
  const Spec spec = transformer_spec(d, 2, 2 * d, s, 1, 16, false);
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be, TrackingAllocator::Mode::Count);
  Model m(spec, Precision::FP32);
  m.allocate(alloc, *be, batch, 1);
  const int64_t unit = tokens * d * 4;
  // The embedding's output; the layer's ln1, attention output, x1, ln2 and output; the final
  // norm's output and dx; the head's dx; the scratch's LayerNorm gradient and stream gradient.
  const int64_t stream = 11 * unit;
  // q, k, v after the head split; the scratch's qkv output and its dq, dk, dv: 3 units each (the
  // scores, 2 x 64 per token, live in fc1's block).
  const int64_t attention = 3 * 3 * unit;
  // fc1's output and pre-activation (2 x ffn: 4 units), the fp32 probabilities (batch x 2 heads x
  // (seq, seq)), the logits and their gradient (16 classes a token).
  const int64_t rest = 4 * unit + batch * 2 * s * s * 4 + 2 * tokens * 16 * 4;
  const int64_t stats = 3 * 2 * tokens * 4;  // three LayerNorms' mean and rstd
  EXPECT_EQ(alloc.current(MemCategory::Activations),
            static_cast<size_t>(stream + attention + rest + stats));
}

// ---- synthetic sequences -----------------------------------------------------------------------

TEST(SyntheticSequences, ShapesLabelsAndDeterminism) {
  TransformerSpec t;
  t.seq_len = 12;
  t.vocab_size = 9;
  const Dataset a = make_synthetic_sequences(t, 50, 20, 4);
  EXPECT_EQ(a.input_dtype, DType::I32);
  EXPECT_EQ(a.sample_dim, 12);
  EXPECT_EQ(a.labels_per_sample, 12);
  EXPECT_EQ(a.num_classes, 9);
  EXPECT_EQ(a.train_size(), 50);
  EXPECT_EQ(a.eval_size(), 20);
  ASSERT_EQ(a.train_tokens.size(), 50u * 12);
  ASSERT_EQ(a.eval_tokens.size(), 20u * 12);
  for (int32_t v : a.train_tokens) ASSERT_TRUE(v >= 0 && v < 9);
  // The rule, written out: x_t names a pointer 1..K back, clamped at position 0.
  const int k = SyntheticSequenceTask{}.max_offset;
  for (int64_t i = 0; i < 50; ++i) {
    const int32_t* x = a.train_tokens.data() + i * 12;
    for (int64_t s = 0; s < 12; ++s) {
      const int64_t src = std::max<int64_t>(0, s - 1 - x[s] % k);
      ASSERT_EQ(a.train_y[i * 12 + s], x[src]) << i << " " << s;
    }
  }
  const Dataset b = make_synthetic_sequences(t, 50, 20, 4);
  EXPECT_EQ(a.train_tokens, b.train_tokens);
  EXPECT_EQ(a.eval_y, b.eval_y);
  const Dataset c = make_synthetic_sequences(t, 50, 20, 5);
  EXPECT_NE(a.train_tokens, c.train_tokens);
  EXPECT_NE(std::vector<int32_t>(a.train_tokens.begin(), a.train_tokens.begin() + 240),
            a.eval_tokens);  // separate streams

  // make_dataset dispatches here for the transformer family.
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_transformer.json");
  const Dataset d = make_dataset(spec);
  const auto& ts = std::get<TransformerSpec>(spec.model);
  EXPECT_EQ(d.train_tokens, make_synthetic_sequences(ts, spec.data.train_samples,
                                                     spec.data.eval_samples, spec.data.seed)
                                .train_tokens);
}

// The best any attention-free model can do: predict y_t from (t, x_t) alone. The Bayes rule
// fitted on the training split (majority label per (t, x_t)) stays at the documented bound on the
// eval split, far below what the tiny transformer reaches.
TEST(SyntheticSequences, NotSolvableWithoutAttention) {
  const Spec spec = load_spec(test::source_dir() + "/configs/tiny_transformer.json");
  const auto& t = std::get<TransformerSpec>(spec.model);
  const Dataset d = make_synthetic_sequences(t, 20000, 4000, 3);
  const int64_t s = t.seq_len, v = t.vocab_size;
  std::vector<int64_t> counts(static_cast<size_t>(s * v * v), 0);
  for (size_t i = 0; i < d.train_y.size(); ++i) {
    const int64_t pos = static_cast<int64_t>(i) % s;
    ++counts[(pos * v + d.train_tokens[i]) * v + d.train_y[i]];
  }
  int64_t right = 0;
  for (size_t i = 0; i < d.eval_y.size(); ++i) {
    const int64_t pos = static_cast<int64_t>(i) % s;
    const int64_t* c = &counts[(pos * v + d.eval_tokens[i]) * v];
    right += (std::max_element(c, c + v) - c) == d.eval_y[i];
  }
  const double acc = static_cast<double>(right) / static_cast<double>(d.eval_y.size());
  const double bound = attention_free_accuracy_bound(s, v);
  EXPECT_NEAR(bound, (1 + 15.0 / 16) / 16, 1e-12);
  EXPECT_NEAR(acc, bound, 0.01);
  EXPECT_LT(acc, 0.15);
}

}  // namespace
}  // namespace mpbench
