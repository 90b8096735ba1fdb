#include "train/max_batch.h"

#include <algorithm>
#include <functional>
#include <numeric>
#include <optional>

#include <fmt/format.h>

#include "kernels/error.h"
#include "models/dataset.h"
#include "train/device_specs.h"
#include "train/trainer.h"

namespace mpbench {

const BatchProbe* MaxBatchResult::best() const {
  for (const BatchProbe& p : probes)
    if (p.batch == max_batch && p.status == RunStatus::Ok) return &p;
  return nullptr;
}

const BatchProbe* MaxBatchResult::bound() const {
  const BatchProbe* out = nullptr;
  for (const BatchProbe& p : probes)
    if (p.status != RunStatus::Ok && (!out || p.batch < out->batch)) out = &p;
  return out;
}

Spec probe_spec(const Spec& spec, Precision p, int64_t batch, int64_t steps,
                const std::string& what_text) {
  const int64_t samples = steps * batch;
  // The data first, large enough for the spec's own batch too, so that no step of the re-reading
  // holds a batch above train_samples.
  nlohmann::json data = {{"type", "synthetic"},
                         {"train_samples", std::max(samples, spec.train.batch_size)},
                         {"eval_samples", 1},
                         {"seed", spec.data.seed}};
  const std::string what = what_text.empty() ? fmt::format("batch {}", batch) : what_text;
  return with_overrides(spec, {{what, {"data"}, data},
                               {what, {"train", "batch_size"}, batch},
                               {what, {"data", "train_samples"}, samples},
                               {what, {"train", "epochs"}, 1},
                               {what, {"train", "warmup_steps"}, 1},
                               {what, {"precisions"}, {precision_name(p)}}});
}

namespace {

// Guesses from what the probes showed (and steps down from a refusal) before the search falls
// back to bisecting, each a probe.
constexpr int kGuesses = 8;

BatchProbe probe(const Spec& spec, Precision p, int64_t batch, Backend& be,
                 const MaxBatchOptions& opts) {
  BatchProbe out;
  out.batch = batch;
  Spec s;
  try {
    s = probe_spec(spec, p, batch, opts.steps);
  } catch (const Error& e) {
    // Past what a spec takes (its size limits, its rules): as far as the search can go.
    if (e.kind() != ErrorKind::BadInput) throw;
    out.status = RunStatus::Failed;
    out.detail = e.what();
    out.refused = true;
    return out;
  }
  // Its data are made whole in host memory, and copied again where the host trains: a probe
  // whose data do not fit there is as far as the search can go (a wide input made a 17 GB
  // dataset at the batch a 64 MiB budget predicted, and its copy failed).
  try {
    check_dataset_fits(s, be.device() == Device::CPU ? 2 : 1);
  } catch (const Error& e) {
    if (!e.is_oom()) throw;
    out.status = RunStatus::Failed;
    out.detail = e.what();
    out.refused = true;
    return out;
  }
  const Dataset data = make_dataset(s);
  TrainOptions t;
  t.memory_limit = opts.memory_limit;
  out.run = train_and_measure(s, data, p, be, t);
  out.status = out.run.status;
  out.detail = out.run.status_detail;
  return out;
}

// The edge of a predicate over multiples of k that holds up to some batch and not past it: from
// `good` (it holds) and `bad` (the smallest batch known where it does not, 0: none yet), the
// batch doubles until it fails or `top` holds (then bad stays 0), and bisection in multiples of k
// closes the gap. Every search of maxbatch, predicted or trained, is this one.
struct Edge {
  int64_t good = 0, bad = 0;
};
Edge find_edge(Edge e, int64_t k, int64_t top, const std::function<bool(int64_t)>& holds) {
  while (e.bad == 0 && e.good < top) {
    const int64_t next = std::min(e.good * 2, top);
    (holds(next) ? e.good : e.bad) = next;
  }
  while (e.bad != 0 && e.bad - e.good > k) {
    const int64_t mid = e.good + (e.bad - e.good) / (2 * k) * k;
    (holds(mid) ? e.good : e.bad) = mid;
  }
  return e;
}

// The multiples of k a spec takes, lo to top. top: the largest within kMaxBatchSize (below k
// when there is none: amp_fp8's K, its lcm with 16, can pass it). lo: the smallest that the
// spec's rules take (0: none), where they refuse the smallest batches (a ResNet whose last
// feature map is 1x1 needs two samples for its batch statistics): the edge of their refusal on
// the prediction, which is nullopt for a refused batch, nothing trained; k without a prediction
// to ask.
struct Accepted {
  int64_t lo = 0, top = 0;
};
Accepted accepted_batches(const BatchOracle& oracle, int64_t k) {
  const int64_t top = kMaxBatchSize / k * k;
  if (top < k) return {0, top};
  if (!oracle.predicted_peak) return {k, top};
  auto refuses = [&](int64_t batch) { return !oracle.predicted_peak(batch).has_value(); };
  if (!refuses(k)) return {k, top};
  return {find_edge({k, 0}, k, top, refuses).bad, top};
}

// The largest multiple of k from `lo` up to `top` whose predicted training peak is within `limit`
// (0 when not even lo is): a doubling and bisection on the prediction alone, nothing trained. A
// batch the spec's rules refuse counts as not fitting.
int64_t predicted_max_batch(const BatchOracle& oracle, int64_t k, int64_t lo, int64_t top,
                            size_t limit) {
  auto fits = [&](int64_t batch) {
    const std::optional<size_t> peak = oracle.predicted_peak(batch);
    return peak && *peak <= limit;
  };
  if (top < lo || !fits(lo)) return 0;
  return find_edge({lo, 0}, k, top, fits).good;
}

// What training at a probed batch took beyond predict_training_memory: the workspace oneDNN and
// cuDNN take as their primitives and algorithms first run, which the prediction leaves out.
// Exact for a probe that trained; for one refused at the limit, what it held plus what it asked
// for, a lower bound. Nullopt where the probe does not say (another failure, a device refusal).
std::optional<size_t> beyond_prediction(const BatchProbe& b) {
  const RunResult& r = b.run;
  if (!r.has_predicted_memory) return std::nullopt;
  const size_t predicted = r.predicted_memory.training_peak;
  if (b.status == RunStatus::Ok)
    return r.memory.training_peak - std::min(predicted, r.memory.training_peak);
  if (b.status == RunStatus::Oom && r.oom_needed_bytes > 0)
    return r.oom_needed_bytes - std::min(predicted, r.oom_needed_bytes);
  return std::nullopt;
}

// amp_fp8: the smallest batch (a power of two up to 16) at which every FP8 Linear that can run
// in FP8 does (1 when none can: then no batch changes its GEMMs' dtype).
int64_t fp8_batch_multiple(const std::vector<LayerInfo>& infos) {
  int64_t m = 1;
  std::function<void(const std::vector<LayerInfo>&)> visit = [&](const auto& lis) {
    for (const LayerInfo& li : lis) {
      // At batch 16 M is a multiple of 16: whether N and K are is what remains.
      if (runs_fp8(li, 16))
        while (!runs_fp8(li, m)) m *= 2;
      visit(li.children);
    }
  };
  visit(infos);
  return m;
}

// K as maxbatch searches it: the one asked for or, in amp_fp8, its least common multiple with
// the batch at which every FP8 Linear's GEMMs take FP8 (MaxBatchResult::multiple).
int64_t searched_multiple(const Spec& spec, Precision p, int64_t multiple) {
  if (!precision_info(p).fp8_linears) return multiple;
  return std::lcm(multiple, fp8_batch_multiple(Model(spec, p).layer_infos()));
}

// predict_training_memory's training peak of a probe at `batch`; nullopt where the spec refuses
// the batch.
std::function<std::optional<size_t>(int64_t)> predicted_peak(const Spec& spec, Precision p,
                                                             Backend& be, int64_t steps) {
  return [&spec, p, &be, steps](int64_t batch) -> std::optional<size_t> {
    try {
      const Spec s = probe_spec(spec, p, batch, steps);
      return predict_training_memory(s, p, be).training_peak;
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::BadInput) throw;
      return std::nullopt;
    }
  };
}

}  // namespace

PredictedMaxBatch predict_max_batch(const Spec& spec, Precision p, Backend& be, size_t limit,
                                    int64_t multiple) {
  MPB_CHECK(multiple >= 1 && limit > 0, "predict_max_batch: multiple {} and limit {} must be >= 1",
            multiple, limit);
  PredictedMaxBatch out;
  out.multiple = searched_multiple(spec, p, multiple);
  const int64_t k = out.multiple;
  BatchOracle oracle;
  oracle.predicted_peak = predicted_peak(spec, p, be, 1);  // the steps change only the data
  const auto [lo, top] = accepted_batches(oracle, k);
  if (lo != 0) out.batch = predicted_max_batch(oracle, k, lo, top, limit);
  out.at_limit = top < k || (out.batch != 0 && out.batch == top);
  return out;
}

MaxBatchResult find_max_batch(const Spec& spec, Precision p, Backend& be,
                              const MaxBatchOptions& opts) {
  MPB_CHECK(opts.multiple >= 1 && opts.steps >= 1,
            "maxbatch: multiple {} and steps {} must be >= 1", opts.multiple, opts.steps);
  MaxBatchResult r;
  MaxBatchOptions o = opts;
  o.multiple = searched_multiple(spec, p, o.multiple);
  if (auto why = unsupported_reason(p, be.device(), be.info())) {
    r.unsupported = *why;
  } else {
    BatchOracle oracle;
    oracle.probe = [&](int64_t batch) { return probe(spec, p, batch, be, o); };
    oracle.predicted_peak = predicted_peak(spec, p, be, o.steps);
    r = search_max_batch(oracle, o);
  }
  r.multiple = o.multiple;
  r.model = spec.name;
  r.precision = p;
  return r;
}

MaxBatchResult search_max_batch(const BatchOracle& oracle, const MaxBatchOptions& opts) {
  MPB_CHECK(opts.multiple >= 1, "maxbatch: multiple {} must be >= 1", opts.multiple);
  MaxBatchResult r;
  const int64_t k = opts.multiple;
  // Every batch is probed once: each new one lies strictly between the largest that trained and
  // the smallest that did not. A probe that failed for another reason than memory (a kernel
  // fault, a library error) says nothing of the bound and may have left the device unusable
  // (a sticky CUDA error fails every later probe): the search ends there.
  struct Stopped {};
  auto fits = [&](int64_t batch) {
    r.probes.push_back(oracle.probe(batch));
    if (opts.on_probe) opts.on_probe(r.probes.back());
    const BatchProbe& b = r.probes.back();
    if (b.status == RunStatus::Failed && !b.refused) throw Stopped{};
    return b.status == RunStatus::Ok;
  };
  // The smallest batch tried: K, or the smallest multiple of it that the spec's rules take.
  const auto [lo, top] = accepted_batches(oracle, k);
  // No multiple of K is within the largest batch a spec takes: that limit, not memory, is the
  // bound, and nothing is probed.
  if (top < k) {
    r.at_limit = true;
    return r;
  }
  if (lo == 0) return r;
  int64_t good = 0, bad = 0;  // the largest batch that trained, the smallest that did not (0: none)
  try {
    if (opts.from_prediction && opts.memory_limit > 0) {
      r.predicted = predicted_max_batch(oracle, k, lo, top, opts.memory_limit);
      // Confirmed by training: the prediction, then the next multiple of K. Where a probe shows
      // that training took more than predicted (a library's workspace), the next guess is the
      // largest batch whose prediction plus that much fits, strictly between the largest batch
      // that trained and the smallest that did not: usually the answer in a probe or two. An
      // oom's figure is a lower bound (the step may grow the workspace again later), so after
      // each oom the guess also steps down by doubling strides at least.
      int64_t guess = r.predicted, stride = k;
      bool confirming = false;  // the guess is the next multiple past a batch that trained
      for (int i = 0; i < kGuesses && guess > good && (bad == 0 || guess < bad); ++i) {
        const bool ok = fits(guess);
        (ok ? good : bad) = guess;
        if (good >= top || (bad != 0 && bad - good <= k)) break;
        // Past what the prediction allows, and it trained: the prediction overstates here, and
        // the doubling below finds the edge faster than steps of K.
        if (ok && confirming) break;
        const std::optional<size_t> extra = beyond_prediction(r.probes.back());
        if (!extra || *extra >= opts.memory_limit) break;
        guess = predicted_max_batch(oracle, k, lo, top, opts.memory_limit - *extra);
        if (!ok) {
          guess = std::min(guess, bad - stride);
          stride *= 2;
        }
        confirming = guess <= good;
        guess = std::max(guess, good + k);
        if (bad != 0) guess = std::min(guess, bad - k);
        // Never below the smallest batch the spec takes (a refused probe would be the bound).
        if (guess < lo) break;
      }
      if (good == 0 && bad != 0) {
        // Still nothing trained: step down from the smallest batch that did not in doubling
        // strides until one does, then bisect, rather than bisect all the way from K. Within
        // the same guesses: a refusal that says nothing of what it needed (the host's memory,
        // not the budget) can lie far above the answer (from 2^20: 20 steps down, then 20
        // bisecting, where bisecting from K takes 20).
        const int64_t from = bad;
        for (int64_t stride = k;
             good == 0 && r.probes.size() < size_t{kGuesses} && from - stride >= lo; stride *= 2)
          (fits(from - stride) ? good : bad) = from - stride;
      }
    }
    if (good == 0) {
      if (bad == lo || !fits(lo)) return r;  // not even the smallest batch trains
      good = lo;
    }
    // What it stops at is kept as it goes: a Stopped probe ends the search with them.
    const Edge e = find_edge({good, bad}, k, top, [&](int64_t batch) {
      const bool ok = fits(batch);
      (ok ? good : bad) = batch;
      return ok;
    });
    r.at_limit = e.bad == 0;
  } catch (const Stopped&) {
    r.stopped = true;
  }
  r.max_batch = good;
  return r;
}

}  // namespace mpbench
