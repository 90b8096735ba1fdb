#pragma once
// Trains one model in one precision mode on one backend and measures it (DESIGN.md,
// "Measurement"): the model is built fresh, trained, evaluated after every epoch, and everything
// is freed before returning. Running out of memory or diverging is a result, not an exception.
#include <functional>
#include <optional>
#include <vector>

#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "train/optimizer.h"
#include "train/results.h"

namespace mpbench {

class DataParallel;

// The steps a training run takes: the warm-up, then `epochs` epochs of
// train_samples / batch_size steps each (a last partial batch is dropped). Everything that
// counts steps (the trainer, progress bars, the profiler, the CPU cost note) takes them here.
struct StepPlan {
  int64_t warmup = 0, per_epoch = 0, epochs = 0;
  int64_t total() const { return warmup + epochs * per_epoch; }
};
// ranks: data parallel's; each step then takes a global batch of ranks x batch_size samples.
StepPlan step_plan(const TrainSpec& train, int64_t train_samples, int ranks = 1);

struct TrainProgress {
  int64_t step = 0;  // steps done, warm-up included
  int64_t total_steps = 0;
  int epoch = 0;                   // epochs finished
  double last_eval_accuracy = -1;  // after the last finished epoch, -1 before the first
  double last_train_loss = -1;
};

// What the trainer runs next, for an observer that treats them apart (the profiler times training
// steps only).
enum class TrainPhase { WarmupStep, Step, Eval };

struct TrainOptions {
  bool cuda_graphs = false;  // capture the training step once and replay it
  std::function<void(const TrainProgress&)> on_progress;  // called after every step, on the host
  // Called on the host before each warm-up step, each measured training step and each
  // evaluation.
  std::function<void(TrainPhase)> on_phase;
  LayerObserver* layer_observer = nullptr;  // told of each layer as it runs (mpbench profile)
  size_t memory_limit = 0;  // cap on training memory (TrackingAllocator::set_limit); 0: none
  // The most workspace one convolution algorithm may take (kernels/backend.h says why this
  // default). The run lends the backend its allocator for that workspace (counted as workspace
  // memory, under memory_limit); what each convolution chose is the run's conv_algorithms.
  size_t conv_workspace_limit = kDefaultConvWorkspaceLimit;
  // The training seed (`run --seeds`): it sets the initialisation and the order in which each
  // epoch takes its batches; the data stay those of data.seed. Absent: the initialisation follows
  // data.seed and the batches run in order.
  std::optional<uint64_t> seed;
  // Data parallel (an MPI launch): this rank trains on its shard of each global batch and the
  // gradients are averaged across ranks after backward. Null: one process.
  DataParallel* data_parallel = nullptr;
};

// What training holds for the whole run: the model (parameters, gradients, activations), the
// step's input batch, the library workspace and the optimizer state, allocated in that order. The
// trainer allocates through this, and predict_training_memory counts through it, so the two
// cannot disagree.
struct TrainingBuffers {
  std::unique_ptr<Model> model;
  // The batch a step reads (inputs, labels), copied from the dataset: activations, as PyTorch's
  // input batch counts in its peak (in fp32 the first layer keeps it for its backward; in an
  // AMP mode it keeps the 16-bit cast, and both are held, as under autocast).
  Tensor x_stage, y_stage;
  std::unique_ptr<Optimizer> optimizer;
};
// init_seed: the parameters' (init_seed_for).
TrainingBuffers allocate_training(const Spec& spec, Precision precision, TrackingAllocator& alloc,
                                  Backend& be, uint64_t init_seed);
uint64_t init_seed_for(const Spec& spec, const std::optional<uint64_t>& training_seed);

// The training memory a run of `spec` in `precision` on `be` takes, per category, counted with a
// counting allocator (nothing is allocated): every buffer of training is allocated before the
// first step, so this is the run's tracked peak of every category but data. Except for what a
// library's workspace grows to as its kernels first run (cuDNN's algorithms on a GPU, oneDNN's
// scratchpads and reordered operands on the native CPU; the reference has none): the
// prediction leaves it out, and maxbatch learns it from its probes.
MemoryReport predict_training_memory(const Spec& spec, Precision precision, Backend& be);

// preflight (models/model.h) and what training itself needs of the host: the per-step series
// (loss, grad norm, scale, skipped, time, and amp_fp8's amax and scale of every FP8 tensor) are
// kept for every step until the run ends, so a spec whose steps would keep more than
// kMaxSeriesBytes of them (warmup_steps 10^9) is refused before any work, naming the steps.
inline constexpr double kMaxSeriesBytes = 2.0 * (1 << 30);
void preflight_training(const Spec& spec);

// An epoch's train_loss (EpochResult) from its steps' losses and loss-scaler skip flags (1: the
// step was skipped).
double epoch_train_loss(const std::vector<float>& losses, const std::vector<float>& skipped);

RunResult train_and_measure(const Spec& spec, const Dataset& data, Precision precision, Backend& be,
                            const TrainOptions& opts = {});

}  // namespace mpbench
