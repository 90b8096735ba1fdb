// PLACEHOLDER (being written this session).
#include "models/synthetic_sequences.h"

namespace mpbench {

Dataset make_synthetic_sequences(const TransformerSpec&, int64_t, int64_t, uint64_t,
                                 const SyntheticSequenceTask&) {
  throw_bad_input("synthetic sequence data is not implemented yet");
}

}  // namespace mpbench
