#pragma once
// The transformer family (DESIGN.md): token + learned position embedding, pre-LN encoder layers
// (multi-head self-attention, optionally causal, and a GELU FFN), a final LayerNorm and a head
// predicting a token at every position (GPT-2 / BERT shapes).
//
// Layers, in order (the names fp32_layers refers to):
//   "embedding"   token + position embedding (fp32 tables, N(0, 0.02)) -> the fp32 residual stream
//   "layer1".."layerN"  (kind "encoder", or "decoder" with the causal mask)
//                 x1 = x  + proj(attention(LN1(x)))
//                 x2 = x1 + fc2(gelu(fc1(LN2(x1))))
//                 attention: fused QKV projection (D -> 3D) split into heads, P = softmax(q k^T /
//                 sqrt(Dh)) with the optional causal mask, out = P v, heads merged, projection.
//                 Parameters "layerI.ln1.gamma/beta", "layerI.qkv.*", "layerI.proj.*",
//                 "layerI.ln2.gamma/beta", "layerI.fc1.*", "layerI.fc2.*".
//   "final_norm"  the final LayerNorm
//   "head"        Linear D -> vocab, fp32 logits (rows * seq_len, vocab). With "tie_embeddings"
//                 (GPT-2) its weight is the token table "embedding.token" and it has no bias; the
//                 table's gradient is the head's dW plus the embedding's scatter-add.
// Linear layers keep nn.Linear's default init U(+-1/sqrt(in)); LayerNorm gamma 1, beta 0.
//
// Numerics follow PyTorch autocast: the residual stream is fp32 in every mode; LayerNorm takes
// fp32 statistics and fp32 gamma/beta and writes its output in the compute dtype of the GEMMs it
// feeds (LN + cast fused); every GEMM (projections, FFN, q k^T, P v) runs in the layer's compute
// dtype (fp32_layers pins a whole layer, "final_norm" or "head" to fp32); attention scores are
// stored in that dtype, the softmax computed in fp32 and its probabilities kept in fp32 for its
// backward, the GEMMs with v reading a copy in that dtype. The scale 1/sqrt(Dh) is the
// alpha of the q k^T GEMM, so fp16 scores stay small. A residual add is fp32 stream + compute-dtype
// branch -> fp32; in backward the branch gets the fp32 stream gradient cast to the compute dtype.
//
// FLOPs (LayerInfo::forward_flops, per sample = seq_len tokens) count GEMM multiply-adds as 2:
//   layer: per token 2 (3 D^2 + D^2 + 2 D ffn) for the projections and the FFN, plus attention
//          (q k^T and P v) 4 S D without a mask, or 2 S D with the causal mask: only the unmasked
//          half of the scores is useful work, so only it is counted, even where a kernel computes
//          the full S x S product. With ffn = 4 D: 24 D^2 + 4 S D (causal 24 D^2 + 2 S D).
//   head:  2 D vocab per token. Embedding, LayerNorm, softmax, biases and adds are not counted.
//
// Saved for backward per layer (activation_bytes): the fp32 input x and x1, both LN outputs
// (compute dtype) and their fp32 mean / rstd, q k v after the head split, the probabilities
// (heads x S x S), the merged attention output, the fc1 pre-activation and output. Scores are
// not kept (their buffer holds dP in backward) and the QKV output buffer is reused for dQKV.
// Memory: what a layer uses only while it runs (the scores, the LayerNorm gradient, dq/dk/dv,
// the 16-bit branch gradient, the outputs of qkv, proj and fc2 and the Linears' input
// gradients) is one set for all layers (EncoderScratch in transformer.cpp), as backward runs one
// layer at a time, and within it buffers whose uses never overlap share memory; each layer keeps
// only the above and the stream gradient it hands down.
#include <memory>
#include <vector>

#include "models/model.h"

namespace mpbench {

// Appends the family's layers for one precision mode. Input: (rows, seq_len) int32 tokens;
// output: fp32 logits (rows * seq_len, vocab_size).
void build_transformer(const Spec& spec, const TransformerSpec& t, Precision precision,
                       std::vector<std::unique_ptr<Layer>>& layers);

}  // namespace mpbench
