#pragma once
// The synthetic sequence task of the transformer family (int32 tokens, a label per position).
//
// Tokens x_0 .. x_{S-1} are independent and uniform over the vocabulary V. The label at position
// t is a copy of an earlier token, chosen by the current one:
//     y_t = x[max(0, t - 1 - (x_t mod K))]
// i.e. x_t names how far back to look (1 .. K positions). The target depends only on positions
// <= t, so a causal model can solve it as well as a bidirectional one, and both the encoder and
// the decoder configs share the generator.
//
// Why it needs attention: the tokens are independent, so without mixing information across
// positions a model sees only x_t and t, which say nothing about x_j for j != t. Only position 0
// (where the pointer is clamped onto x_0 itself) is solvable per token; everywhere else the best
// guess is right with probability 1/V. An attention-free model therefore reaches at most
//     (1 + (S - 1) / V) / S
// of the labels: 12.1% at S = 16, V = 16 (configs/tiny_transformer.json), 0.2% at S = 512 or
// 1024, V = 1024. A model with attention can reach 100%: one head per layer has to attend to the
// relative offset 1 + (x_t mod K), a content-dependent position lookup.
//
// Measured on the CPU reference with configs/tiny_transformer.json (2 causal layers, d 32,
// 2 heads, ffn 64, S 16, V 16, K 4, AdamW 3e-3, batch 32, 4096 train / 512 eval samples,
// seed 11), eval accuracy after epochs 1 / 2 / 3 / 4 (128 steps each):
//   fp32      93.7% / 99.1% / 100%  / 100%   (eval loss 0.001)
//   tf32      93.5% / 99.0% / 100%  / 98.2%
//   amp_fp16  93.7% / 98.1% / 99.7% / 99.99%
//   amp_bf16  93.6% / 98.8% / 98.1% / 100%
// against the attention-free bound of 12.1%; after a single step it is at 8.5%, near chance.
//
// Everything comes from our own RNG (models/rng.h), so a seed gives the same bytes everywhere;
// the train and eval splits use separate streams.
#include <cstdint>

#include "models/dataset.h"

namespace mpbench {

struct SyntheticSequenceTask {
  // K: the pointer goes 1 .. K positions back. Larger K needs a sharper positional lookup and
  // learns more slowly.
  int max_offset = 4;
};

// The label the task assigns to position t of one sequence (exposed for tests).
int32_t synthetic_sequence_label(const int32_t* tokens, int64_t t, int max_offset);

// The best accuracy a model without attention can reach on sequences of seq_len over vocab.
double attention_free_accuracy_bound(int64_t seq_len, int64_t vocab);

Dataset make_synthetic_sequences(const TransformerSpec& t, int64_t n_train, int64_t n_eval,
                                 uint64_t seed,
                                 const SyntheticSequenceTask& task = SyntheticSequenceTask{},
                                 const DataProgress& progress = {});

}  // namespace mpbench
