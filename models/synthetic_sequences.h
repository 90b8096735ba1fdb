#pragma once
// The synthetic sequence task of the transformer family (int32 tokens, a label per position).
#include <cstdint>

#include "models/dataset.h"

namespace mpbench {

struct SyntheticSequenceTask {};

Dataset make_synthetic_sequences(const TransformerSpec& t, int64_t n_train, int64_t n_eval,
                                 uint64_t seed,
                                 const SyntheticSequenceTask& task = SyntheticSequenceTask{});

}  // namespace mpbench
