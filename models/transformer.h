#pragma once
// The transformer family (DESIGN.md): token + learned position embedding, pre-LN encoder layers
// (multi-head self-attention, optionally causal, and a GELU FFN), a final LayerNorm and a head
// predicting the next token at every position. Layers: "embedding", "layer1" .. "layerN", "head".
#include <memory>
#include <vector>

#include "models/model.h"

namespace mpbench {

// Appends the family's layers for one precision mode. Input: (rows, seq_len) int32 tokens;
// output: fp32 logits (rows * seq_len, vocab_size).
void build_transformer(const Spec& spec, const TransformerSpec& t, Precision precision,
                       std::vector<std::unique_ptr<Layer>>& layers);

}  // namespace mpbench
