#include "models/synthetic_sequences.h"

#include <algorithm>

#include <fmt/format.h>

#include "models/rng.h"

namespace mpbench {

int32_t synthetic_sequence_label(const int32_t* tokens, int64_t t, int max_offset) {
  const int64_t back = 1 + tokens[t] % max_offset;
  return tokens[std::max<int64_t>(0, t - back)];
}

double attention_free_accuracy_bound(int64_t seq_len, int64_t vocab) {
  return (1.0 + static_cast<double>(seq_len - 1) / static_cast<double>(vocab)) /
         static_cast<double>(seq_len);
}

namespace {

// done / total: the sequences made before this split, and in all (for progress).
void generate(Rng& rng, int64_t n, int64_t seq_len, uint32_t vocab, int max_offset,
              std::vector<int32_t>& tokens, std::vector<int32_t>& labels,
              const DataProgress& progress, int64_t done, int64_t total) {
  tokens.resize(static_cast<size_t>(n * seq_len));
  labels.resize(tokens.size());
  for (int64_t i = 0; i < n; ++i) {
    if (progress && i % 64 == 0) progress(done + i, total);
    int32_t* x = tokens.data() + i * seq_len;
    int32_t* y = labels.data() + i * seq_len;
    for (int64_t t = 0; t < seq_len; ++t) x[t] = static_cast<int32_t>(rng.below(vocab));
    for (int64_t t = 0; t < seq_len; ++t) y[t] = synthetic_sequence_label(x, t, max_offset);
  }
}

}  // namespace

Dataset make_synthetic_sequences(const TransformerSpec& t, int64_t n_train, int64_t n_eval,
                                 uint64_t seed, const SyntheticSequenceTask& task,
                                 const DataProgress& progress) {
  MPB_CHECK(t.seq_len > 0 && t.vocab_size > 0 && t.vocab_size <= (int64_t{1} << 31) - 1,
            "synthetic sequences: seq_len {} and vocab_size {} must be positive", t.seq_len,
            t.vocab_size);
  MPB_CHECK(task.max_offset > 0, "synthetic sequences: max_offset must be positive, got {}",
            task.max_offset);
  MPB_CHECK(n_train > 0 && n_eval > 0, "synthetic sequences: empty split ({} train, {} eval)",
            n_train, n_eval);
  Dataset ds;
  ds.sample_dim = t.seq_len;
  ds.num_classes = static_cast<int>(t.vocab_size);
  ds.input_dtype = DType::I32;
  ds.labels_per_sample = t.seq_len;
  Rng train_rng(seed, /*stream=*/21), eval_rng(seed, /*stream=*/22);
  const uint32_t vocab = static_cast<uint32_t>(t.vocab_size);
  const int64_t total = n_train + n_eval;
  generate(train_rng, n_train, t.seq_len, vocab, task.max_offset, ds.train_tokens, ds.train_y,
           progress, 0, total);
  generate(eval_rng, n_eval, t.seq_len, vocab, task.max_offset, ds.eval_tokens, ds.eval_y, progress,
           n_train, total);
  if (progress) progress(total, total);
  ds.description = fmt::format(
      "synthetic sequences: {} train, {} eval, seq {} x vocab {}, y_t = x[t - 1 - (x_t mod {})] "
      "(attention-free bound {:.1f}%)",
      n_train, n_eval, t.seq_len, t.vocab_size, task.max_offset,
      100.0 * attention_free_accuracy_bound(t.seq_len, t.vocab_size));
  return ds;
}

}  // namespace mpbench
