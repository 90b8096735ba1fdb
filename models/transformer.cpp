#include "models/transformer.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <fmt/format.h>

#include "models/family.h"
#include "models/linear.h"
#include "models/shared_scratch.h"
#include "models/synthetic_sequences.h"

namespace mpbench {
namespace {

constexpr float kLayerNormEps = 1e-5f;
constexpr float kEmbeddingStd = 0.02f;  // GPT-2 / BERT

// The first elements of a buffer allocated for the full batch, viewed with shape s.
Tensor head_of(const Tensor& buf, Shape s) {
  return buf.slice(0, s);
}

int64_t bytes_per_element(DType dt) {
  return static_cast<int64_t>(dtype_size(dt));
}

// A Linear applied to the seq_len tokens of a sample, as an inspect row.
LayerInfo over_tokens(const Linear& l, DType input_dtype, int64_t s, std::string name,
                      std::string kind = "") {
  LayerInfo li = l.info(input_dtype);
  li.name = std::move(name);
  if (!kind.empty()) li.kind = std::move(kind);
  li.output_shape = Shape{s, li.output_shape[0]};
  li.forward_flops *= static_cast<double>(s);
  li.input_flops *= static_cast<double>(s);
  li.activation_bytes *= s;
  li.fp8_copy_bytes *= s;
  li.matmul->m = s;
  return li;
}

// A LayerNorm over the tokens of a sample: fp32 statistics, its output in `out` dtype; saved for
// backward are the fp32 input and mean / rstd (the output is counted by the GEMM reading it).
LayerInfo layernorm_rows(std::string name, int64_t s, int64_t d, DType out) {
  LayerInfo li;
  li.name = std::move(name);
  li.kind = "layernorm";
  li.output_shape = Shape{s, d};
  li.params = 2 * d;
  li.compute_dtype = DType::F32;
  li.storage_dtype = out;
  li.activation_bytes = s * (d + 2) * bytes_per_element(DType::F32);
  return li;
}

// ---- embedding ----------------------------------------------------------------------------------

class Embedding : public Layer {
 public:
  explicit Embedding(const TransformerSpec& t) : Layer("embedding"), t_(t) {}

  void declare_params(ParamStore& ps) override {
    tok_ = ps.declare(name_ + ".token", Shape{t_.vocab_size, t_.d_model},
                      ParamStore::Init::normal(kEmbeddingStd));
    pos_ = ps.declare(name_ + ".position", Shape{t_.seq_len, t_.d_model},
                      ParamStore::Init::normal(kEmbeddingStd));
  }
  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype,
                bool /*need_dx: token ids have none*/) override {
    MPB_CHECK(input_dtype == DType::I32, "embedding: input must be int32 tokens, got {}",
              dtype_name(input_dtype));
    y_ = alloc.alloc(Shape{batch * t_.seq_len, t_.d_model}, DType::F32, MemCategory::Activations);
  }
  Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x) override {
    MPB_CHECK(x.dtype == DType::I32 && x.shape.rank == 2 && x.shape[1] == t_.seq_len,
              "embedding: input {} {}, expected (rows, {}) int32", x.shape.str(),
              dtype_name(x.dtype), t_.seq_len);
    tokens_ = x;
    Tensor y = head_of(y_, Shape{x.shape[0] * t_.seq_len, t_.d_model});
    be.embedding_forward(x, ps.master(tok_), ps.master(pos_), y);
    return y;
  }
  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool) override {
    Tensor dtok = ps.grad(tok_), dpos = ps.grad(pos_);
    // Tied: the head's backward, which runs first, wrote its dW into the table's gradient.
    be.embedding_backward(tokens_, dy, dtok, dpos, /*add_to_tok=*/t_.tie_embeddings);
    return Tensor{};  // tokens have no gradient
  }
  // Where the token table's parameter index is, once declared (a tied head's weight).
  const int* token_param() const { return &tok_; }
  LayerInfo info(DType) const override {
    LayerInfo li;
    li.name = name_;
    li.kind = "embedding";
    li.output_shape = Shape{t_.seq_len, t_.d_model};
    li.params = (t_.vocab_size + t_.seq_len) * t_.d_model;
    li.compute_dtype = DType::F32;
    li.storage_dtype = DType::F32;
    li.activation_bytes = t_.seq_len * bytes_per_element(DType::I32);  // the token ids
    return li;
  }
  DType output_dtype(DType) const override { return DType::F32; }

 private:
  TransformerSpec t_;
  int tok_ = -1, pos_ = -1;
  Tensor y_, tokens_;
};

// ---- encoder layer ------------------------------------------------------------------------------

// What an encoder layer holds only while it runs: the scores (between the QK^T GEMM and the
// softmax; then the 16-bit copy of the fp32 probabilities; in the backward that copy again, dP
// and dS), the LayerNorm gradient, dq/dk/dv, the branch gradient in the compute dtype, the
// outputs of qkv, proj and fc2 (read once by the next op; qkv's holds the backward's dqkv) and its
// Linears' input gradients. One set serves every layer, as PyTorch's caching allocator hands a
// layer's freed memory to the next (about 1.6 GB a layer at gpt2_small's shapes in fp32, whose
// step took 46 GB on the H200 against PyTorch's 33).
// Within a layer, buffers whose uses never overlap share one slot. In the order a layer runs:
//   forward:       qkv out [big] -> permute; scores [S] -> softmax (P in fp32, kept) -> P in
//                  the compute dtype [S]; P v [dln] -> permute;
//                  proj out [narrow] -> add; fc1 out and pre-activation [the layer's fc1 block,
//                  kept]; fc2 out [narrow] -> add
//   FFN backward:  fc2 dx [big] -> fc1 backward -> fc1 dx [narrow] -> LN2 backward -> dln [dln]
//   attn backward: proj dx [narrow] -> permute -> dO [dln]; P in the compute dtype [S] -> dv
//                  [narrow]; dP [S] -> dS
//                  -> dq, dk [narrow] -> permute -> dqkv [big] -> qkv backward -> qkv dx
//                  [narrow] -> LN1 backward -> dln [dln]
// so "big" is the largest of qkv's output and fc2's dx, "narrow" three tokens x D, "dln" tokens x
// D in fp32. The scores [S] go where fc1 keeps its output and pre-activation when they fit there
// (2 ffn >= heads x seq: the block is written after them in the forward and read for the last
// time before them in the backward, as PyTorch's allocator would reuse it), else into "big".
// The fp32 stream gradient a layer hands down alternates between two buffers: layer i writes it
// to one and reads its dy (layer i + 1's) from the other.
// Allocated by the first layer that allocates with a given allocator and batch, in the widest
// compute dtype of the layers (fp32_layers may pin some), and viewed in each layer's own.
bool scores_fit_fc1(const TransformerSpec& t) {
  return 2 * t.ffn_dim >= t.heads * t.seq_len;
}

class EncoderScratch {
 public:
  EncoderScratch(const TransformerSpec& t, DType widest, DType amp)
      : slots_(kSlots), widest_(widest) {
    const int64_t s = t.seq_len, d = t.d_model;
    const int64_t w = static_cast<int64_t>(dtype_size(widest));
    if (!scores_fit_fc1(t)) slots_.need_per_sample(kBig, t.heads * s * s * w);
    slots_.need_per_sample(kBig, 3 * s * d * w);
    slots_.need_per_sample(kBig, s * t.ffn_dim * w);
    slots_.need_per_sample(kNarrow, 3 * s * d * w);
    slots_.need_per_sample(kDln, s * d * 4);
    for (int64_t i = 1; i <= t.layers; ++i) slots_.need_per_sample(stream_slot(i), s * d * 4);
    // In fp32 the branch gradient is the stream gradient itself (EncoderLayer::branch_grad).
    if (amp != DType::F32)
      slots_.need_per_sample(kBranchGrad, s * d * static_cast<int64_t>(dtype_size(amp)));
  }

  void allocate(TrackingAllocator& alloc, int64_t batch) { slots_.allocate(alloc, batch); }
  // Before the Linears allocate. fc1's output (fc2's saved input) and pre-activation are the
  // layer's own, in fc1_block: (2, rows, ffn).
  void lend(Linear& qkv, Linear& proj, Linear& fc1, Linear& fc2, const Tensor& fc1_block) const {
    const Tensor big = slots_.whole(kBig, widest_), narrow = slots_.whole(kNarrow, widest_);
    const int64_t half = fc1_block.numel() / 2;
    qkv.borrow(big, narrow);
    proj.borrow(narrow, narrow);
    fc1.borrow(fc1_block.slice(0, Shape{half}), narrow, fc1_block.slice(half, Shape{half}));
    fc2.borrow(narrow, big);
  }
  // The scores when they do not fit fc1's block.
  Tensor scores(Shape s, DType dt) const { return slots_.view(kBig, s, dt); }
  Tensor dln(Shape s) const { return slots_.view(kDln, s, DType::F32); }
  // The heads' attention output (P v) in the forward, its gradient dO in the backward.
  Tensor attn_out(Shape s, DType dt) const { return slots_.view(kDln, s, dt); }
  Tensor dqkv_heads(Shape s, DType dt) const { return slots_.view(kNarrow, s, dt); }
  Tensor branch_grad(Shape s, DType dt) const { return slots_.view(kBranchGrad, s, dt); }
  // The stream gradient layer `index` (1-based) hands down.
  Tensor stream_grad(int64_t index, Shape s) const {
    return slots_.view(stream_slot(index), s, DType::F32);
  }

 private:
  enum Slot { kBig, kNarrow, kDln, kBranchGrad, kDx0, kDx1, kSlots };
  static Slot stream_slot(int64_t index) { return index % 2 == 0 ? kDx0 : kDx1; }
  SharedScratch slots_;
  DType widest_;
};

class EncoderLayer : public Layer {
 public:
  EncoderLayer(int64_t index, const TransformerSpec& t, LayerPrecision prec,
               std::shared_ptr<EncoderScratch> scratch)
      : Layer("layer" + std::to_string(index)),
        index_(index),
        t_(t),
        prec_(prec),
        scratch_(std::move(scratch)),
        dh_(t.d_model / t.heads),
        qkv_(name_ + ".qkv", t.d_model, 3 * t.d_model, Activation::None, prec, false),
        proj_(name_ + ".proj", t.d_model, t.d_model, Activation::None, prec, false),
        fc1_(name_ + ".fc1", t.d_model, t.ffn_dim, Activation::Gelu, prec, false),
        fc2_(name_ + ".fc2", t.ffn_dim, t.d_model, Activation::None, prec, false) {}

  void set_training(bool training) override {
    Layer::set_training(training);
    for (Linear* l : {&qkv_, &proj_, &fc1_, &fc2_}) l->set_training(training);
  }

  void declare_params(ParamStore& ps) override {
    const Shape d{t_.d_model};
    ln1_g_ = ps.declare(name_ + ".ln1.gamma", d, ParamStore::Init::constant(1.0f));
    ln1_b_ = ps.declare(name_ + ".ln1.beta", d, ParamStore::Init::constant(0.0f));
    qkv_.declare_params(ps);
    proj_.declare_params(ps);
    ln2_g_ = ps.declare(name_ + ".ln2.gamma", d, ParamStore::Init::constant(1.0f));
    ln2_b_ = ps.declare(name_ + ".ln2.beta", d, ParamStore::Init::constant(0.0f));
    fc1_.declare_params(ps);
    fc2_.declare_params(ps);
  }

  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype,
                bool /*need_dx: always, never first*/) override {
    MPB_CHECK(input_dtype == DType::F32, "{}: the residual stream must be fp32, got {}", name_,
              dtype_name(input_dtype));
    const DType cd = prec_.compute;
    const int64_t tokens = batch * t_.seq_len, d = t_.d_model;
    const int64_t bh = batch * t_.heads, s = t_.seq_len;
    auto act = [&](Shape sh, DType dt) { return alloc.alloc(sh, dt, MemCategory::Activations); };
    // Forward.
    ln1_out_ = act(Shape{tokens, d}, cd);
    mean1_ = act(Shape{tokens}, DType::F32);
    rstd1_ = act(Shape{tokens}, DType::F32);
    scratch_->allocate(alloc, batch);
    fc1_block_ = act(Shape{2 * tokens * t_.ffn_dim}, cd);
    scratch_->lend(qkv_, proj_, fc1_, fc2_, fc1_block_);
    qkv_.allocate(alloc, tokens, cd, true);
    qkv_heads_ = act(Shape{3 * tokens * d}, cd);
    // fp32 whatever the mode: autocast's softmax output, which its backward reads (the GEMM with
    // v takes a 16-bit copy, made in the scores' buffer when needed).
    probs_ = act(Shape{bh, s, s}, DType::F32);
    ctx_ = act(Shape{tokens, d}, cd);
    proj_.allocate(alloc, tokens, cd, true);
    x1_ = act(Shape{tokens, d}, DType::F32);
    ln2_out_ = act(Shape{tokens, d}, cd);
    mean2_ = act(Shape{tokens}, DType::F32);
    rstd2_ = act(Shape{tokens}, DType::F32);
    fc1_.allocate(alloc, tokens, cd, true);
    fc2_.allocate(alloc, tokens, cd, true);
    out_ = act(Shape{tokens, d}, DType::F32);
  }

  Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x) override {
    const int64_t d = t_.d_model, s = t_.seq_len, h = t_.heads;
    MPB_CHECK(x.dtype == DType::F32 && x.cols() == d && x.rows() % s == 0, "{}: input {} {}", name_,
              x.shape.str(), dtype_name(x.dtype));
    rows_ = x.rows() / s;
    const int64_t tokens = rows_ * s, bh = rows_ * h;
    x_ = x;

    // Attention branch.
    Tensor ln1 = head_of(ln1_out_, Shape{tokens, d});
    Tensor mean1 = head_of(mean1_, Shape{tokens}), rstd1 = head_of(rstd1_, Shape{tokens});
    be.layernorm_forward(kLayerNormEps, x, ps.master(ln1_g_), ps.master(ln1_b_), ln1, mean1, rstd1);
    qkv_out_ = qkv_.forward(be, ps, ln1);  // (tokens, 3D) = (B, S, 3, H, Dh)
    Tensor qkv_heads = head_of(qkv_heads_, Shape{3, rows_, h, s, dh_});
    be.permute(qkv_out_.reshaped(Shape{rows_, s, 3, h, dh_}), qkv_heads, {2, 0, 3, 1, 4});
    Tensor q = qkv_part(qkv_heads_, 0), k = qkv_part(qkv_heads_, 1), v = qkv_part(qkv_heads_, 2);
    Tensor scores = scores_buffer(Shape{bh, s, s});
    Tensor probs = head_of(probs_, Shape{bh, s, s});
    GemmDesc qk;
    qk.trans_b = true;
    qk.alpha = alpha();
    qk.math = prec_.math;
    be.gemm(qk, q, k, scores);
    be.attention_softmax_forward(scores, 1.0f, t_.causal, probs);
    Tensor ctx_heads = scratch_->attn_out(Shape{bh, s, dh_}, prec_.compute);
    GemmDesc pv;
    pv.math = prec_.math;
    be.gemm(pv, probs_in_compute_dtype(be, probs, scores), v, ctx_heads);
    Tensor ctx = head_of(ctx_, Shape{rows_, s, h, dh_});
    be.permute(ctx_heads.reshaped(Shape{rows_, h, s, dh_}), ctx, {0, 2, 1, 3});
    Tensor attn = proj_.forward(be, ps, ctx.reshaped(Shape{tokens, d}));
    Tensor x1 = head_of(x1_, Shape{tokens, d});
    be.add(x, attn, x1);

    // FFN branch.
    Tensor ln2 = head_of(ln2_out_, Shape{tokens, d});
    Tensor mean2 = head_of(mean2_, Shape{tokens}), rstd2 = head_of(rstd2_, Shape{tokens});
    be.layernorm_forward(kLayerNormEps, x1, ps.master(ln2_g_), ps.master(ln2_b_), ln2, mean2,
                         rstd2);
    Tensor f = fc2_.forward(be, ps, fc1_.forward(be, ps, ln2));
    Tensor out = head_of(out_, Shape{tokens, d});
    be.add(x1, f, out);
    return out;
  }

  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool) override {
    const int64_t d = t_.d_model, s = t_.seq_len, h = t_.heads;
    const int64_t tokens = rows_ * s, bh = rows_ * h;
    MPB_CHECK(dy.dtype == DType::F32 && dy.rows() == tokens && dy.cols() == d, "{}: dy {} {}",
              name_, dy.shape.str(), dtype_name(dy.dtype));
    Tensor dln = scratch_->dln(Shape{tokens, d});
    Tensor dx = scratch_->stream_grad(index_, Shape{tokens, d});  // dx1, then dx

    // FFN branch: dx1 = dy + LN2'(fc1'(fc2'(dy))).
    // fc2's dX GEMM applies fc1's GELU derivative and writes fc1's bias gradient.
    const Linear* fuse = fc2_.can_fuse_upstream(fc1_) ? &fc1_ : nullptr;
    Tensor dh = fc2_.backward(be, ps, branch_grad(be, dy), true, fuse, false);
    Tensor dln2 = fc1_.backward(be, ps, dh, true, nullptr, fuse != nullptr);
    Tensor dg2 = ps.grad(ln2_g_), db2 = ps.grad(ln2_b_);
    be.layernorm_backward(dln2, head_of(x1_, Shape{tokens, d}), ps.master(ln2_g_),
                          head_of(mean2_, Shape{tokens}), head_of(rstd2_, Shape{tokens}), dln, dg2,
                          db2);
    be.add(dy, dln, dx);

    // Attention branch.
    Tensor dctx = proj_.backward(be, ps, branch_grad(be, dx), true);  // (B, S, H, Dh)
    Tensor dout = scratch_->attn_out(Shape{rows_, h, s, dh_}, prec_.compute);
    be.permute(dctx.reshaped(Shape{rows_, s, h, dh_}), dout, {0, 2, 1, 3});
    dout = dout.reshaped(Shape{bh, s, dh_});
    Tensor q = qkv_part(qkv_heads_, 0), k = qkv_part(qkv_heads_, 1), v = qkv_part(qkv_heads_, 2);
    const Tensor dqkv_heads = scratch_->dqkv_heads(Shape{3 * tokens * d}, prec_.compute);
    Tensor dq = qkv_part(dqkv_heads, 0), dk = qkv_part(dqkv_heads, 1), dv = qkv_part(dqkv_heads, 2);
    Tensor probs = head_of(probs_, Shape{bh, s, s});
    Tensor dp = scores_buffer(Shape{bh, s, s});  // the scores are done with
    GemmDesc g_dv;                               // dv = P^T dO
    g_dv.trans_a = true;
    g_dv.math = prec_.math;
    be.gemm(g_dv, probs_in_compute_dtype(be, probs, dp), dout, dv);
    GemmDesc g_dp;  // dP = dO v^T, over the 16-bit copy of P: dv is done with it
    g_dp.trans_b = true;
    g_dp.math = prec_.math;
    be.gemm(g_dp, dout, v, dp);
    be.attention_softmax_backward(dp, probs, 1.0f, dp);  // dS, in place
    GemmDesc g_dq;                                       // dq = alpha dS k
    g_dq.alpha = alpha();
    g_dq.math = prec_.math;
    be.gemm(g_dq, dp, k, dq);
    GemmDesc g_dk;  // dk = alpha dS^T q
    g_dk.trans_a = true;
    g_dk.alpha = alpha();
    g_dk.math = prec_.math;
    be.gemm(g_dk, dp, q, dk);
    // Heads back to (B, S, 3, H, Dh), into the QKV output buffer (backward does not read it).
    Tensor dqkv = qkv_out_.reshaped(Shape{rows_, s, 3, h, dh_});
    be.permute(head_of(dqkv_heads, Shape{3, rows_, h, s, dh_}), dqkv, {1, 3, 0, 2, 4});
    Tensor dln1 = qkv_.backward(be, ps, qkv_out_, true);
    Tensor dg1 = ps.grad(ln1_g_), db1 = ps.grad(ln1_b_);
    be.layernorm_backward(dln1, x_, ps.master(ln1_g_), head_of(mean1_, Shape{tokens}),
                          head_of(rstd1_, Shape{tokens}), dln, dg1, db1);
    be.add(dx, dln, dx);
    return dx;
  }

  LayerInfo info(DType) const override {
    const int64_t d = t_.d_model, s = t_.seq_len, h = t_.heads;
    const DType cd = prec_.compute;
    const int64_t cs = bytes_per_element(cd);
    LayerInfo li;
    li.name = name_;
    li.kind = t_.causal ? "decoder" : "encoder";  // causal self-attention is a GPT decoder block
    li.output_shape = Shape{s, d};
    li.compute_dtype = cd;
    li.storage_dtype = DType::F32;
    // The attention GEMMs: one per sample and head, over the unmasked scores when causal (the
    // s(s+1)/2 at or below the diagonal: all of them at s = 1).
    const double attn_flops =
        t_.causal ? static_cast<double>(s) * (s + 1) * d : 2.0 * static_cast<double>(s) * s * d;
    auto attention_gemm = [&](std::string name, std::string kind, Shape out, int64_t saved,
                              MatmulDims mm) {
      LayerInfo g;
      g.name = std::move(name);
      g.kind = std::move(kind);
      g.output_shape = out;
      g.forward_flops = attn_flops;
      g.compute_dtype = g.storage_dtype = cd;
      g.activation_bytes = saved;
      g.matmul = mm;
      return g;
    };
    li.add_child(layernorm_rows("ln1", s, d, cd));  // saves the fp32 stream x
    li.add_child(over_tokens(qkv_, cd, s, "qkv"));
    // q and k after the head split are saved; the scores are not (their buffer holds dP).
    li.add_child(attention_gemm("scores", "gemm q.k^T", Shape{h, s, s}, 2 * s * d * cs,
                                MatmulDims{false, s, false, s, dh_}));
    LayerInfo sm;
    sm.name = "softmax";
    sm.kind = t_.causal ? "softmax+causal mask" : "softmax";
    sm.output_shape = Shape{h, s, s};
    sm.compute_dtype = DType::F32;
    sm.storage_dtype = DType::F32;
    sm.activation_bytes = h * s * s * 4;  // the probabilities, fp32 (the 16-bit copy is scratch)
    li.add_child(sm);
    li.add_child(attention_gemm("attn_v", "gemm p.v", Shape{h, s, dh_}, s * d * cs,
                                MatmulDims{false, s, false, dh_, s}));  // saves v
    li.add_child(over_tokens(proj_, cd, s, "proj", "linear+residual"));
    li.add_child(layernorm_rows("ln2", s, d, cd));  // saves x1
    li.add_child(over_tokens(fc1_, cd, s, "fc1"));
    li.add_child(over_tokens(fc2_, cd, s, "fc2", "linear+residual"));
    return li;
  }
  DType output_dtype(DType) const override { return DType::F32; }

 private:
  float alpha() const { return 1.0f / std::sqrt(static_cast<float>(dh_)); }
  Tensor scores_buffer(Shape s) const {
    return scores_fit_fc1(t_) ? fc1_block_.viewed_as(s, prec_.compute)
                              : scratch_->scores(s, prec_.compute);
  }
  // The probabilities as the GEMMs with v read them: in the compute dtype, copied into `buf` (a
  // buffer of their shape that is free until that GEMM has run) unless that is fp32.
  Tensor probs_in_compute_dtype(Backend& be, const Tensor& probs, const Tensor& buf) const {
    if (prec_.compute == DType::F32) return probs;
    Tensor low = buf;
    be.cast(probs, low);
    return low;
  }
  // q, k or v (which = 0, 1, 2) of the last forward: (B*H, S, Dh) of the (3, B, H, S, Dh) buffer.
  Tensor qkv_part(const Tensor& buf, int which) const {
    const int64_t n = rows_ * t_.heads * t_.seq_len * dh_;
    return buf.slice(which * n, Shape{rows_ * t_.heads, t_.seq_len, dh_});
  }
  // The gradient entering a branch: the fp32 stream gradient in the compute dtype. In fp32 it
  // is the stream gradient itself: the branch ends in a Linear without activation, whose
  // in-place bias_act_backward leaves the values as they are.
  Tensor branch_grad(Backend& be, const Tensor& g) {
    if (prec_.compute == DType::F32) return g;
    Tensor out = scratch_->branch_grad(g.shape, prec_.compute);
    be.cast(g, out);
    return out;
  }

  int64_t index_;  // 1-based: the layer's place in the stack
  TransformerSpec t_;
  LayerPrecision prec_;
  std::shared_ptr<EncoderScratch> scratch_;
  int64_t dh_;
  Linear qkv_, proj_, fc1_, fc2_;
  int ln1_g_ = -1, ln1_b_ = -1, ln2_g_ = -1, ln2_b_ = -1;
  int64_t rows_ = 0;
  Tensor x_, qkv_out_;
  Tensor ln1_out_, mean1_, rstd1_, qkv_heads_, probs_, ctx_, x1_;
  Tensor ln2_out_, mean2_, rstd2_, out_;
  Tensor fc1_block_;  // fc1's output and pre-activation, and the scores when they fit
};

// ---- final LayerNorm and head -------------------------------------------------------------------

class FinalNorm : public Layer {
 public:
  // out_dtype: the dtype the head's GEMM reads.
  FinalNorm(const TransformerSpec& t, DType out_dtype)
      : Layer("final_norm"), t_(t), out_dtype_(out_dtype) {}
  void declare_params(ParamStore& ps) override {
    g_ = ps.declare(name_ + ".gamma", Shape{t_.d_model}, ParamStore::Init::constant(1.0f));
    b_ = ps.declare(name_ + ".beta", Shape{t_.d_model}, ParamStore::Init::constant(0.0f));
  }
  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype,
                bool /*need_dx: always, never first*/) override {
    MPB_CHECK(input_dtype == DType::F32, "final_norm: input must be fp32, got {}",
              dtype_name(input_dtype));
    const int64_t tokens = batch * t_.seq_len;
    y_ = alloc.alloc(Shape{tokens, t_.d_model}, out_dtype_, MemCategory::Activations);
    mean_ = alloc.alloc(Shape{tokens}, DType::F32, MemCategory::Activations);
    rstd_ = alloc.alloc(Shape{tokens}, DType::F32, MemCategory::Activations);
    dx_ = alloc.alloc(Shape{tokens, t_.d_model}, DType::F32, MemCategory::Activations);
  }
  Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x) override {
    x_ = x;
    const int64_t tokens = x.rows();
    Tensor y = head_of(y_, Shape{tokens, t_.d_model});
    Tensor mean = head_of(mean_, Shape{tokens}), rstd = head_of(rstd_, Shape{tokens});
    be.layernorm_forward(kLayerNormEps, x, ps.master(g_), ps.master(b_), y, mean, rstd);
    return y;
  }
  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool) override {
    const int64_t tokens = x_.rows();
    Tensor dx = head_of(dx_, Shape{tokens, t_.d_model});
    Tensor dg = ps.grad(g_), db = ps.grad(b_);
    be.layernorm_backward(dy, x_, ps.master(g_), head_of(mean_, Shape{tokens}),
                          head_of(rstd_, Shape{tokens}), dx, dg, db);
    return dx;
  }
  LayerInfo info(DType) const override {
    return layernorm_rows(name_, t_.seq_len, t_.d_model, out_dtype_);
  }
  DType output_dtype(DType) const override { return out_dtype_; }

 private:
  TransformerSpec t_;
  DType out_dtype_;
  int g_ = -1, b_ = -1;
  Tensor x_, y_, mean_, rstd_, dx_;
};

// The vocabulary projection applied at every position: a Linear over rows * seq_len rows, with
// the counts of a sample (seq_len tokens).
// Tied (tie_embeddings), its weight is the token table, declared earlier by `embedding`.
class Head : public Layer {
 public:
  Head(const TransformerSpec& t, LayerPrecision prec, const Embedding* tied_to)
      : Layer("head"),
        t_(t),
        linear_("head", t.d_model, t.vocab_size, Activation::None, prec, /*fp32_out=*/true),
        tied_(tied_to != nullptr) {
    if (tied_to) linear_.use_shared_weight(tied_to->token_param());
  }
  void set_training(bool training) override {
    Layer::set_training(training);
    linear_.set_training(training);
  }
  void declare_params(ParamStore& ps) override { linear_.declare_params(ps); }
  void allocate(TrackingAllocator& alloc, int64_t batch, DType input_dtype, bool need_dx) override {
    linear_.allocate(alloc, batch * t_.seq_len, input_dtype, need_dx);
  }
  Tensor forward(Backend& be, const ParamStore& ps, const Tensor& x) override {
    return linear_.forward(be, ps, x);
  }
  Tensor backward(Backend& be, const ParamStore& ps, const Tensor& dy, bool need_dx) override {
    return linear_.backward(be, ps, dy, need_dx);
  }
  LayerInfo info(DType input_dtype) const override {
    LayerInfo li = over_tokens(linear_, input_dtype, t_.seq_len, name_);
    if (tied_) li.kind += " (tied to embedding)";
    return li;
  }
  DType output_dtype(DType) const override { return DType::F32; }

 private:
  TransformerSpec t_;
  Linear linear_;
  bool tied_;
};

}  // namespace

void build_transformer(const Spec& spec, const TransformerSpec& t, Precision precision,
                       std::vector<std::unique_ptr<Layer>>& layers) {
  MPB_CHECK(t.heads > 0 && t.d_model % t.heads == 0 && t.layers > 0 && t.seq_len > 0 &&
                t.vocab_size > 0 && t.ffn_dim > 0,
            "{}: transformer: d_model {} must be a multiple of heads {}", spec.source_path,
            t.d_model, t.heads);
  auto prec = [&](const std::string& name) {
    return layer_precision(precision, spec.fp32_layers, name);
  };
  auto embedding = std::make_unique<Embedding>(t);
  const Embedding* tied_to = t.tie_embeddings ? embedding.get() : nullptr;
  layers.push_back(std::move(embedding));
  // The scratch's dtypes: the layers' 16-bit compute dtype (fp32 when none has one), and fp32
  // when any layer computes in it.
  DType amp = DType::F32;
  bool any_fp32 = false;
  for (int64_t i = 1; i <= t.layers; ++i) {
    const DType cd = prec("layer" + std::to_string(i)).compute;
    if (cd == DType::F32)
      any_fp32 = true;
    else
      amp = cd;
  }
  auto scratch = std::make_shared<EncoderScratch>(t, any_fp32 ? DType::F32 : amp, amp);
  for (int64_t i = 1; i <= t.layers; ++i)
    layers.push_back(
        std::make_unique<EncoderLayer>(i, t, prec("layer" + std::to_string(i)), scratch));
  // The final norm writes what the head's GEMM reads; pinning either of them keeps it fp32.
  const LayerPrecision head_prec = prec("head");
  const DType norm_out = prec("final_norm").compute == DType::F32 ? DType::F32 : head_prec.compute;
  layers.push_back(std::make_unique<FinalNorm>(t, norm_out));
  layers.push_back(std::make_unique<Head>(t, head_prec, tied_to));
}

// ---- the family's entry (models/family.h) ------------------------------------------------------

namespace {

ModelSpec read_transformer(const spec_json::ObjectReader& r) {
  TransformerSpec m;
  m.d_model = r.integer("d_model", {1, 65536}, std::nullopt);
  m.heads = r.integer("heads", {1, 1024}, std::nullopt);
  m.ffn_dim = r.integer("ffn_dim", {1, 1 << 18}, std::nullopt);
  m.seq_len = r.integer("seq_len", {1, 1 << 17}, std::nullopt);
  m.layers = r.integer("layers", kLayers, TransformerSpec{}.layers);
  m.vocab_size = r.integer("vocab_size", kClasses, std::nullopt);
  m.causal = r.boolean("causal", TransformerSpec{}.causal);
  m.tie_embeddings = r.boolean("tie_embeddings", TransformerSpec{}.tie_embeddings);
  if (m.d_model % m.heads != 0) {
    r.ctx().fail(r.sub("heads"), fmt::format("expected a divisor of model.d_model ({}), got {}",
                                             m.d_model, m.heads));
  }
  return m;
}

nlohmann::json write_transformer(const ModelSpec& v) {
  const auto& m = std::get<TransformerSpec>(v);
  return {
      {"type", "transformer"},      {"d_model", m.d_model}, {"heads", m.heads},
      {"ffn_dim", m.ffn_dim},       {"seq_len", m.seq_len}, {"layers", m.layers},
      {"vocab_size", m.vocab_size}, {"causal", m.causal},   {"tie_embeddings", m.tie_embeddings}};
}

Footprint transformer_footprint(const ModelSpec& v) {
  const auto& t = std::get<TransformerSpec>(v);
  Footprint f;
  const double d = t.d_model, s = t.seq_len, ffn = t.ffn_dim;
  const double head = t.tie_embeddings ? 0.0 : static_cast<double>(t.vocab_size) * (d + 1);
  // Per layer: qkv, proj, fc1 and fc2 with their biases, and two layernorms' gamma and beta; the
  // final layernorm.
  const double layer = 4 * d * d + 2 * d * ffn + (3 * d + d + ffn + d) + 2 * (2 * d);
  f.params = static_cast<double>(t.vocab_size) * d + head + s * d +
             static_cast<double>(t.layers) * layer + 2 * d;
  f.activations_per_sample =
      static_cast<double>(t.layers) * s * (12 * d + 2 * ffn + 2 * t.heads * s);
  f.inputs_per_sample = 2.0 * s;  // tokens and a label per position
  f.inputs_what = "2 x model.seq_len";
  return f;
}

ModelIo transformer_io(const ModelSpec& v) {
  const auto& t = std::get<TransformerSpec>(v);
  ModelIo io;
  io.input_dtype = DType::I32;
  io.input_dim = t.seq_len;
  io.labels_per_sample = t.seq_len;
  io.num_classes = t.vocab_size;
  return io;
}

}  // namespace

Family transformer_family() {
  return {"transformer",
          {"d_model", "heads", "ffn_dim", "seq_len", "layers", "vocab_size", "causal",
           "tie_embeddings"},
          [](const ModelSpec& m) { return std::holds_alternative<TransformerSpec>(m); },
          read_transformer,
          write_transformer,
          [](const spec_json::Ctx&, const Spec& s) { require_synthetic_data(s); },
          transformer_footprint,
          transformer_io,
          [](const Spec& s, Precision p, std::vector<std::unique_ptr<Layer>>& layers) {
            build_transformer(s, std::get<TransformerSpec>(s.model), p, layers);
          },
          [](const Spec& s, const DataProgress& progress) {
            const DataSpec& d = s.data;
            return make_synthetic_sequences(std::get<TransformerSpec>(s.model), d.train_samples,
                                            d.eval_samples, d.seed, SyntheticSequenceTask{},
                                            progress);
          }};
}

}  // namespace mpbench
