#include "train/trainer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <new>
#include <utility>

#include "models/model.h"
#include "models/rng.h"
#include "train/data_parallel.h"
#include "train/device_specs.h"
#include "train/optimizer.h"

namespace mpbench {

StepPlan step_plan(const TrainSpec& train, int64_t train_samples, int ranks) {
  StepPlan p;
  p.warmup = train.warmup_steps;
  p.per_epoch = train_samples / (train.batch_size * ranks);
  p.epochs = train.epochs;
  if (ranks > 1 && p.per_epoch == 0)
    throw_bad_input(fmt::format(
        "{} ranks of batch {} take {} samples a step, more than the {} training samples", ranks,
        train.batch_size, train.batch_size * ranks, train_samples));
  MPB_CHECK(p.per_epoch > 0, "batch size {} larger than the {} training samples", train.batch_size,
            train_samples);
  return p;
}

namespace {

// The random stream of epoch e's batch order is kBatchOrderStream + e (of the training seed).
constexpr uint64_t kBatchOrderStream = 1000;

// The CPUs a run's steps keep busy: the native backend's threads, the reference's BLAS threads,
// and a GPU's one host thread launching its work.
int host_threads(const DeviceInfo& info) {
  if (info.kind == "cpu") return info.cpu_threads;
  if (info.kind == "reference") return std::max(1, info.blas_threads);
  return 1;
}

// Everything one run allocates besides the model: the dataset on the device, the staging buffers
// a (replayable) step reads its batch from (TrainingBuffers'), device scalars, and the per-step
// series.
struct RunState {
  Tensor train_x, train_y, eval_x, eval_y;
  Tensor x_stage, y_stage;
  Tensor scale, scale_used, tracker, found_inf, grad_norm, step_count;
  Tensor loss_step, correct_step;
  Tensor eval_loss, eval_correct, eval_loss_tail;
  Tensor series_loss, series_norm, series_scale, series_skip;
  // amp_fp8: per fp8 dtype group (models/fp8_scaling.h), every tensor's amax_used and scale after
  // each step: (steps, tensors of the group).
  std::array<Tensor, 2> series_fp8_amax, series_fp8_scale;
};

Tensor scalar(TrackingAllocator& alloc, Backend& be, float value) {
  Tensor t = alloc.alloc(Shape{1}, DType::F32, MemCategory::Data);
  be.fill(t, value);
  return t;
}

float read_scalar(Backend& be, const Tensor& t) {
  float v = 0;
  be.download(t, &v);
  return v;
}

// Device-wide usage relative to the baseline taken before the model was built.
void sample_device_memory(Backend& be, MemoryReport& mem) {
  if (!mem.has_device) return;
  be.synchronize();
  auto info = be.memory_info();
  if (!info) return;
  size_t used = info->total_bytes - info->free_bytes;
  if (used > mem.device_baseline)
    mem.device_peak = std::max(mem.device_peak, used - mem.device_baseline);
}

// Lends the backend the run's allocator for its convolution workspace (under Workspace, so that
// the training peak and the memory limit count it) and takes it back, the buffer released, before
// the allocator goes, whichever way the run ends.
class ConvWorkspaceLease {
 public:
  ConvWorkspaceLease(Backend& be, TrackingAllocator& alloc, size_t limit) : be_(be) {
    be.set_conv_workspace_provider(alloc.workspace_provider(limit));
  }
  ~ConvWorkspaceLease() { be_.set_conv_workspace_provider({}); }
  ConvWorkspaceLease(const ConvWorkspaceLease&) = delete;
  ConvWorkspaceLease& operator=(const ConvWorkspaceLease&) = delete;

 private:
  Backend& be_;
};

class Run {
 public:
  Run(const Spec& spec, const Dataset& data, Precision p, Backend& be, const TrainOptions& opts)
      : spec_(spec),
        data_(data),
        precision_(p),
        be_(be),
        opts_(opts),
        dp_(opts.data_parallel),
        alloc_(be),
        conv_workspace_(be, alloc_, opts.conv_workspace_limit) {
    alloc_.set_limit(opts.memory_limit);
  }

  // Trains and measures into r. A failure part way (out of memory, a runtime error) is rethrown
  // after r has kept what the run had got: the series of the steps it finished and the memory
  // it reached (README: its epochs, memory and per-step series say how far it got).
  void execute(RunResult& r);

 private:
  void train_all(RunResult& r);
  void keep_partial(RunResult& r);
  void record_memory(RunResult& r);
  // execute's phases, in order.
  void take_memory_baseline(RunResult& r);
  void build(RunResult& r);
  void warm_up(const StepPlan& plan, RunResult& r);
  void capture_graph(RunResult& r);
  // One epoch's timed steps and its evaluation; false when the loss stopped being finite.
  bool run_epoch(const StepPlan& plan, int64_t epoch, RunResult& r);
  void read_back_series(RunResult& r);
  void read_back_fp8_series(int64_t done, RunResult& r);
  void derive_metrics(const StepPlan& plan, RunResult& r);

  void step_on_staged_batch(MemoryReport* mem = nullptr);
  void train_step(int64_t batch_index, int64_t global_step, bool sample_memory, RunResult& r);
  void evaluate(EpochResult& e);
  // Data parallel: steps [first, first + n) of the loss series become the mean over the ranks
  // (each rank's is the mean over its shard), so that the series is the global batch's loss.
  void average_loss_series(int64_t first, int64_t n);
  int ranks() const { return dp_ ? dp_->size() : 1; }
  void report() {
    if (opts_.on_progress) opts_.on_progress(prog_);
  }
  void phase(TrainPhase ph) {
    if (opts_.on_phase) opts_.on_phase(ph);
  }

  const Spec& spec_;
  const Dataset& data_;
  Precision precision_;
  Backend& be_;
  const TrainOptions& opts_;
  DataParallel* dp_;
  TrackingAllocator alloc_;
  ConvWorkspaceLease conv_workspace_;  // after alloc_: given back before it goes
  std::unique_ptr<Model> model_;
  std::unique_ptr<Optimizer> opt_;
  RunState dev_;  // the run's device buffers and scalars
  bool scaling_ = false;
  bool graph_ready_ = false;
  bool timing_ = false;  // inside an epoch's timed steps
  int64_t batch_ = 0;
  int64_t global_ = 0;          // training steps done, warm-up included
  TrainProgress prog_;          // what on_progress is told
  std::vector<float> step_ms_;  // per step, from the events between steps; NaN for warm-up
  std::unique_ptr<Event> start_, stop_;
  std::vector<std::unique_ptr<Event>> marks_;  // one per step boundary of an epoch
  HostLoadMeter host_load_;                    // over the epochs, their evaluations included
};

void Run::build(RunResult& r) {
  batch_ = spec_.train.batch_size;
  TrainingBuffers buffers =
      allocate_training(spec_, precision_, alloc_, be_, init_seed_for(spec_, opts_.seed));
  model_ = std::move(buffers.model);
  opt_ = std::move(buffers.optimizer);
  dev_.x_stage = buffers.x_stage;
  dev_.y_stage = buffers.y_stage;
  model_->set_observer(opts_.layer_observer);

  const int64_t dim = data_.sample_dim, labels_per_sample = data_.labels_per_sample;
  const ModelIo& io = model_->io();
  MPB_CHECK(io.input_dtype == data_.input_dtype && io.input_dim == dim &&
                io.labels_per_sample == labels_per_sample && io.num_classes == data_.num_classes,
            "dataset ({} x {} {}, {} labels per sample, {} classes) does not fit the model", dim,
            data_.train_size(), dtype_name(data_.input_dtype), labels_per_sample,
            data_.num_classes);
  auto upload = [&](const auto& host, Shape shape, DType dt) {
    Tensor t = alloc_.alloc(shape, dt, MemCategory::Data);
    be_.upload(host.data(), t);
    return t;
  };
  const bool tokens = data_.input_dtype == DType::I32;
  const DType xdt = data_.input_dtype;
  dev_.train_x = tokens ? upload(data_.train_tokens, Shape{data_.train_size(), dim}, xdt)
                        : upload(data_.train_x, Shape{data_.train_size(), dim}, xdt);
  dev_.eval_x = tokens ? upload(data_.eval_tokens, Shape{data_.eval_size(), dim}, xdt)
                       : upload(data_.eval_x, Shape{data_.eval_size(), dim}, xdt);
  dev_.train_y = upload(data_.train_y, Shape{data_.train_size() * labels_per_sample}, DType::I32);
  dev_.eval_y = upload(data_.eval_y, Shape{data_.eval_size() * labels_per_sample}, DType::I32);

  const auto& ls = spec_.loss_scale;
  scaling_ = loss_scaling_enabled(ls, precision_);
  r.loss_scaling = scaling_;
  dev_.scale = scalar(alloc_, be_, scaling_ ? static_cast<float>(ls.init) : 1.0f);
  dev_.scale_used = scalar(alloc_, be_, 1.0f);
  dev_.tracker = alloc_.alloc(Shape{1}, DType::I32, MemCategory::Data);
  be_.fill(dev_.tracker, 0.0f);
  dev_.found_inf = scalar(alloc_, be_, 0.0f);
  dev_.grad_norm = scalar(alloc_, be_, 0.0f);
  dev_.step_count = scalar(alloc_, be_, 0.0f);
  dev_.loss_step = scalar(alloc_, be_, 0.0f);
  dev_.correct_step = scalar(alloc_, be_, 0.0f);
  dev_.eval_loss = scalar(alloc_, be_, 0.0f);
  dev_.eval_correct = scalar(alloc_, be_, 0.0f);
  dev_.eval_loss_tail = scalar(alloc_, be_, 0.0f);
  const int64_t total = static_cast<int64_t>(r.steps.size());
  for (Tensor* t : {&dev_.series_loss, &dev_.series_norm, &dev_.series_scale, &dev_.series_skip})
    *t = alloc_.alloc(Shape{std::max<int64_t>(total, 1)}, DType::F32, MemCategory::Data);
  const auto& groups = model_->params().fp8().groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].tensors.empty()) continue;
    const int64_t n = groups[g].scale.numel();  // a step's rows, as train_step copies them
    for (Tensor* t : {&dev_.series_fp8_amax[g], &dev_.series_fp8_scale[g]})
      *t = alloc_.alloc(Shape{std::max<int64_t>(total, 1) * n}, DType::F32, MemCategory::Data);
  }
}

// One training step on the staged batch. Reads and writes only fixed buffers, so it can be
// captured once into a CUDA graph and replayed. With `mem`, device memory is sampled at the phase
// boundaries (after forward, backward, and the optimizer step), which synchronizes.
void Run::step_on_staged_batch(MemoryReport* mem) {
  be_.copy(dev_.scale, dev_.scale_used);
  be_.fill(dev_.loss_step, 0.0f);
  be_.fill(dev_.correct_step, 0.0f);
  Tensor logits = model_->forward(be_, dev_.x_stage);
  // Data parallel: the loss gradient divided by the global batch's rows, so that each rank's
  // gradients are its rows of one process's at the global batch, their FP8 and 16-bit casts
  // included (twice the values, each rank's mean, round otherwise near underflow and
  // overflow), and their sum across the ranks is the global batch's gradient.
  be_.softmax_xent(logits, dev_.y_stage, &model_->dlogits_buffer(),
                   scaling_ ? &dev_.scale : nullptr, dev_.loss_step, dev_.correct_step,
                   logits.shape[0] * ranks());
  if (mem) sample_device_memory(be_, *mem);
  // Data parallel: each bucket's all-reduce starts as soon as the backward has made it.
  Tensor& grads = model_->params().grads_flat();
  model_->backward(be_, model_->dlogits_buffer(),
                   dp_ ? std::function<void(int64_t)>(
                             [&](int64_t from) { dp_->gradients_ready(be_, grads, from); })
                       : nullptr);
  if (mem) sample_device_memory(be_, *mem);
  // Before the unscale and the inf/NaN check, so that every rank skips the same steps.
  if (dp_) dp_->reduce_gradients(be_, grads);
  be_.unscale_check_norm(grads, scaling_ ? &dev_.scale : nullptr, dev_.found_inf, dev_.grad_norm);
  const Tensor* skip_flag = scaling_ ? &dev_.found_inf : nullptr;
  opt_->step(be_, model_->params(), skip_flag, dev_.step_count);
  // Data parallel: the FP8 amaxes of every rank's shard maxed, so that all scale alike. The
  // history's older slots were maxed in their own steps: the newest is all that differs.
  if (dp_)
    for (const Fp8Scaling::Group& g : model_->params().fp8().groups()) {
      if (g.tensors.empty()) continue;
      Tensor newest = g.newest();
      dp_->max_across_ranks(be_, newest);
    }
  model_->update_fp8_scaling(be_);
  if (scaling_) {
    const auto& ls = spec_.loss_scale;
    be_.update_loss_scale(dev_.scale, dev_.tracker, dev_.found_inf, ls.growth_factor,
                          ls.backoff_factor, static_cast<int32_t>(ls.growth_interval));
  }
  be_.count_step(dev_.step_count, skip_flag);
  if (mem) sample_device_memory(be_, *mem);
}

void Run::train_step(int64_t batch_index, int64_t global_step, bool sample_memory, RunResult& r) {
  const int64_t dim = data_.sample_dim, labels_per_sample = data_.labels_per_sample;
  // This rank's shard of global batch batch_index: the rank-th batch_ rows of it.
  const int64_t row = (batch_index * ranks() + (dp_ ? dp_->rank() : 0)) * batch_;
  Tensor xs = dev_.train_x.slice(row * dim, Shape{batch_, dim});
  Tensor ys = dev_.train_y.slice(row * labels_per_sample, Shape{batch_ * labels_per_sample});
  be_.copy(xs, dev_.x_stage);
  be_.copy(ys, dev_.y_stage);
  if (graph_ready_) {
    be_.replay();
  } else {
    step_on_staged_batch(sample_memory ? &r.memory : nullptr);
  }
  auto at = [&](Tensor& series) { return series.slice(global_step, Shape{1}); };
  Tensor l = at(dev_.series_loss), n = at(dev_.series_norm), sc = at(dev_.series_scale),
         sk = at(dev_.series_skip);
  be_.copy(dev_.loss_step, l);
  be_.copy(dev_.grad_norm, n);
  be_.copy(dev_.scale_used, sc);
  be_.copy(dev_.found_inf, sk);
  if (dp_) dp_->end_step(timing_);
  const auto& groups = model_->params().fp8().groups();
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].tensors.empty()) continue;
    const int64_t n = groups[g].scale.numel();
    Tensor a = dev_.series_fp8_amax[g].slice(global_step * n, Shape{n});
    Tensor sc8 = dev_.series_fp8_scale[g].slice(global_step * n, Shape{n});
    be_.copy(groups[g].amax_used, a);
    be_.copy(groups[g].scale, sc8);
  }
}

void Run::evaluate(EpochResult& e) {
  const int64_t dim = data_.sample_dim, labels_per_sample = data_.labels_per_sample;
  const int64_t n = data_.eval_size();
  model_->set_training(false);
  be_.fill(dev_.eval_loss, 0.0f);
  be_.fill(dev_.eval_loss_tail, 0.0f);
  be_.fill(dev_.eval_correct, 0.0f);
  const int64_t full = n / batch_, tail = n % batch_;
  for (int64_t b = 0; b <= full; ++b) {
    int64_t rows = b < full ? batch_ : tail;
    if (rows == 0) break;
    Tensor x = dev_.eval_x.slice(b * batch_ * dim, Shape{rows, dim});
    Tensor y = dev_.eval_y.slice(b * batch_ * labels_per_sample, Shape{rows * labels_per_sample});
    Tensor logits = model_->forward(be_, x);
    be_.softmax_xent(logits, y, nullptr, nullptr, b < full ? dev_.eval_loss : dev_.eval_loss_tail,
                     dev_.eval_correct);
  }
  model_->set_training(true);
  // Each batch adds its mean loss; weight the batches by their rows.
  double loss_full = read_scalar(be_, dev_.eval_loss),
         loss_tail = read_scalar(be_, dev_.eval_loss_tail);
  e.eval_loss = (loss_full * batch_ + loss_tail * tail) / static_cast<double>(n);
  // Accuracy over every predicted label (every position for next-token prediction).
  e.eval_accuracy =
      read_scalar(be_, dev_.eval_correct) / static_cast<double>(n * labels_per_sample);
}

void Run::execute(RunResult& r) {
  try {
    train_all(r);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) keep_partial(r);
    throw;
  }
}

void Run::keep_partial(RunResult& r) {
  record_memory(r);
  r.steps.clear();  // its planned length, zeros for the steps never taken
  if (global_ == 0) return;
  try {
    read_back_series(r);
  } catch (const Error&) {
    r.steps.clear();  // the device may be unusable after the failure: no series, not zeros
  }
}

void Run::train_all(RunResult& r) {
  take_memory_baseline(r);
  // Not under data parallel: the all-reduce's events would be recorded inside the capture.
  const bool graphs = opts_.cuda_graphs && be_.supports_graphs() && !dp_;
  StepPlan plan = step_plan(spec_.train, data_.train_size(), ranks());
  // The capture follows an eager step (libraries initialise lazily, outside it), and that step
  // trains like any other: with graphs, warmup 0 runs as 1, and the result says so.
  if (graphs && plan.warmup == 0) plan.warmup = 1;
  r.warmup_steps = plan.warmup;
  r.steps.resize(plan.total());
  step_ms_.assign(plan.total(), std::nanf(""));
  prog_.total_steps = plan.total();

  build(r);
  sample_device_memory(be_, r.memory);
  if (dp_) dp_->begin_run(static_cast<size_t>(model_->params().grads_flat().numel()));
  r.flops_per_step = model_->training_flops_per_sample() * static_cast<double>(batch_);

  warm_up(plan, r);
  if (graphs) capture_graph(r);
  start_ = be_.create_event();
  stop_ = be_.create_event();
  for (int64_t b = 0; b <= plan.per_epoch; ++b) marks_.push_back(be_.create_event());
  host_load_.begin();
  for (int64_t ep = 0; ep < plan.epochs; ++ep) {
    if (!run_epoch(plan, ep, r)) break;
  }
  host_load_.end();  // each epoch waited for its steps (its time) and its evaluation
  sample_device_memory(be_, r.memory);

  read_back_series(r);
  derive_metrics(plan, r);
  // Before set_workspace drops the plans.
  r.conv_algorithms = be_.conv_algorithms();
  r.conv_workspace_bytes = be_.conv_workspace_bytes();
  r.kernels = be_.kernel_implementations();
  if (be_.workspace_bytes()) be_.set_workspace(Tensor{});
}

void Run::take_memory_baseline(RunResult& r) {
  r.memory.has_device = be_.memory_info().has_value();
  if (r.memory.has_device) {
    be_.synchronize();
    auto info = be_.memory_info();
    r.memory.device_baseline = info->total_bytes - info->free_bytes;
  }
}

// Warm-up steps train on the first batches but stay out of every epoch's time.
void Run::warm_up(const StepPlan& plan, RunResult& r) {
  for (int64_t i = 0; i < plan.warmup; ++i, ++global_) {
    phase(TrainPhase::WarmupStep);
    train_step(i % plan.per_epoch, global_, global_ == 0, r);
    prog_.step = global_ + 1;
    report();
  }
  average_loss_series(0, plan.warmup);
}

void Run::capture_graph(RunResult& r) {
  be_.begin_capture();
  try {
    step_on_staged_batch();
  } catch (...) {
    be_.abort_capture();
    throw;
  }
  be_.end_capture();
  graph_ready_ = true;
  r.cuda_graphs = true;
}

bool Run::run_epoch(const StepPlan& plan, int64_t epoch, RunResult& r) {
  const int64_t n = plan.per_epoch;
  EpochResult e;
  e.steps = n;
  const int64_t first = global_;
  // Events between consecutive steps give per-step times; they are read after the epoch, so
  // recording them adds no synchronisation.
  // With a training seed, the epoch takes its batches in an order of its own (Fisher-Yates).
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; ++b) order[b] = b;
  if (opts_.seed) {
    Rng rng(*opts_.seed, kBatchOrderStream + static_cast<uint64_t>(epoch));
    for (int64_t b = n - 1; b > 0; --b)
      std::swap(order[b], order[rng.below(static_cast<uint32_t>(b + 1))]);
  }
  start_->record();
  marks_[0]->record();
  timing_ = true;
  for (int64_t b = 0; b < n; ++b, ++global_) {
    phase(TrainPhase::Step);
    train_step(order[b], global_, global_ == 0, r);
    marks_[b + 1]->record();
    prog_.step = global_ + 1;
    report();
  }
  stop_->record();
  timing_ = false;
  if (dp_) dp_->end_epoch();
  e.time_ms = stop_->elapsed_ms(*start_);
  for (int64_t b = 0; b < n; ++b)
    step_ms_[first + b] = static_cast<float>(marks_[b + 1]->elapsed_ms(*marks_[b]));
  phase(TrainPhase::Eval);
  start_->record();
  evaluate(e);
  stop_->record();
  e.eval_time_ms = stop_->elapsed_ms(*start_);

  average_loss_series(global_ - n, n);
  std::vector<float> losses(n), skipped(n, 0.0f);
  be_.download(dev_.series_loss.slice(global_ - n, Shape{n}), losses.data());
  if (scaling_) be_.download(dev_.series_skip.slice(global_ - n, Shape{n}), skipped.data());
  e.train_loss = epoch_train_loss(losses, skipped);
  r.epochs.push_back(e);
  prog_.epoch = static_cast<int>(epoch + 1);
  prog_.last_eval_accuracy = e.eval_accuracy;
  prog_.last_train_loss = e.train_loss;
  report();
  if (!std::isfinite(e.train_loss) || !std::isfinite(e.eval_loss)) {
    r.status = RunStatus::Diverged;
    r.status_detail = fmt::format("loss became non-finite in epoch {}", epoch + 1);
    return false;
  }
  return true;
}

void Run::average_loss_series(int64_t first, int64_t n) {
  if (!dp_ || n == 0) return;
  Tensor s = dev_.series_loss.slice(first, Shape{n});
  std::vector<float> loss(n);
  be_.download(s, loss.data());
  std::vector<double> sum(loss.begin(), loss.end());
  dp_->collective().sum_host(sum.data(), sum.size());
  for (int64_t i = 0; i < n; ++i) loss[i] = static_cast<float>(sum[i] / dp_->size());
  be_.upload(loss.data(), s);
}

// Per-step series, read back once at the end.
void Run::read_back_series(RunResult& r) {
  const int64_t done = global_;
  std::vector<float> loss(done), norm(done), scale(done), skip(done);
  if (done > 0) {
    be_.download(dev_.series_loss.slice(0, Shape{done}), loss.data());
    be_.download(dev_.series_norm.slice(0, Shape{done}), norm.data());
    be_.download(dev_.series_scale.slice(0, Shape{done}), scale.data());
    be_.download(dev_.series_skip.slice(0, Shape{done}), skip.data());
  }
  r.steps.resize(done);
  for (int64_t i = 0; i < done; ++i) {
    r.steps[i] = StepRecord{loss[i], norm[i], scale[i], scaling_ && skip[i] != 0.0f, step_ms_[i]};
    r.skipped_steps += r.steps[i].skipped ? 1 : 0;
  }
  r.final_loss_scale = read_scalar(be_, dev_.scale);
  read_back_fp8_series(done, r);
}

// The first and the last FP8 layer's tensors (x, w, dy each, in declaration order).
void Run::read_back_fp8_series(int64_t done, RunResult& r) {
  const Fp8Scaling& f8 = model_->params().fp8();
  if (f8.empty() || done == 0) return;
  std::array<std::vector<float>, 2> amax, scale;
  for (size_t g = 0; g < 2; ++g) {
    if (f8.groups()[g].tensors.empty()) continue;
    const int64_t n = f8.groups()[g].scale.numel();
    amax[g].resize(done * n);
    scale[g].resize(done * n);
    be_.download(dev_.series_fp8_amax[g].slice(0, Shape{done * n}), amax[g].data());
    be_.download(dev_.series_fp8_scale[g].slice(0, Shape{done * n}), scale[g].data());
  }
  constexpr int kPerLayer = kFp8RecordedTensors / 2;  // the first and the last layer's
  for (int i = 0; i < f8.size(); ++i) {
    if (i >= kPerLayer && i < f8.size() - kPerLayer) continue;
    const int g = f8.group_of(i);
    const int64_t n = f8.groups()[g].scale.numel(), row = f8.row_of(i);
    Fp8TensorSeries t{f8.name(i), dtype_name(f8.format(i)), {}, {}};
    for (int64_t s = 0; s < done; ++s) {
      t.amax.push_back(amax[g][s * n + row]);
      t.scale.push_back(scale[g][s * n + row]);
    }
    t.clipped_steps = fp8_clipped_steps(t, spec_.fp8.amax_compute == AmaxCompute::MostRecent);
    r.fp8_scaling.push_back(std::move(t));
  }
}

void Run::derive_metrics(const StepPlan& plan, RunResult& r) {
  std::vector<double> times;
  for (const auto& e : r.epochs) times.push_back(e.time_ms);
  r.epoch_time_ms = compute_time_stats(times);
  if (!r.epochs.empty()) {
    r.final_accuracy = r.epochs.back().eval_accuracy;
    r.final_loss = r.epochs.back().eval_loss;
  }
  if (r.epoch_time_ms.median > 0) {
    double secs = r.epoch_time_ms.median / 1000.0;
    // Every rank's samples: the global batch's.
    r.samples_per_second = static_cast<double>(plan.per_epoch * batch_ * ranks()) / secs;
    r.tflops = r.flops_per_step * static_cast<double>(plan.per_epoch) / secs / 1e12;
  }
  if (auto ceiling = ceilings_for(be_.info(), precision_)) {
    r.peak_tflops = ceiling->peak_tflops;
    if (r.peak_tflops > 0) r.percent_of_peak = 100.0 * r.tflops / r.peak_tflops;
  }
  if (dp_) r.data_parallel = dp_->result(r.epochs);
  r.host_load = host_load_.result(host_threads(be_.info()));
  record_memory(r);
}

void Run::record_memory(RunResult& r) {
  r.memory.tracked_peak = alloc_.peak_total();
  r.memory.training_peak = alloc_.peak_training();
  for (int c = 0; c < kMemCategoryCount; ++c)
    r.memory.by_category[c] = alloc_.peak(static_cast<MemCategory>(c));
}

}  // namespace

uint64_t init_seed_for(const Spec& spec, const std::optional<uint64_t>& training_seed) {
  if (training_seed) return *training_seed * 0xbf58476d1ce4e5b9ull + 29;
  return spec.data.seed * 0x9e3779b97f4a7c15ull + 17;
}

TrainingBuffers allocate_training(const Spec& spec, Precision precision, TrackingAllocator& alloc,
                                  Backend& be, uint64_t init_seed) {
  TrainingBuffers b;
  b.model = std::make_unique<Model>(spec, precision);
  b.model->allocate(alloc, be, spec.train.batch_size, init_seed);
  const ModelIo& io = b.model->io();
  const int64_t batch = spec.train.batch_size;
  b.x_stage = alloc.alloc(Shape{batch, io.input_dim}, io.input_dtype, MemCategory::Activations);
  b.y_stage =
      alloc.alloc(Shape{batch * io.labels_per_sample}, DType::I32, MemCategory::Activations);
  if (size_t ws = be.workspace_bytes()) {
    Tensor w = alloc.alloc(Shape{static_cast<int64_t>(ws / 4)}, DType::F32, MemCategory::Workspace);
    if (!alloc.counting()) be.set_workspace(w);
  }
  b.optimizer = Optimizer::make(spec.train.optimizer, b.model->params(), alloc, be);
  return b;
}

namespace {

// The FP8 tensors (x, w, dy of every GEMM that runs in FP8) of a model's layers.
int64_t fp8_tensors(const std::vector<LayerInfo>& infos) {
  int64_t n = 0;
  for (const LayerInfo& li : infos) n += (li.fp8_dtypes ? 3 : 0) + fp8_tensors(li.children);
  return n;
}

}  // namespace

double epoch_train_loss(const std::vector<float>& losses, const std::vector<float>& skipped) {
  double sum = 0;
  int64_t counted = 0;
  for (size_t i = 0; i < losses.size(); ++i) {
    if (skipped[i] != 0.0f && !std::isfinite(losses[i])) continue;
    sum += losses[i];
    ++counted;
  }
  // Every step skipped with a non-finite loss: nothing trained, NaN (the run diverged).
  return counted > 0 ? sum / static_cast<double>(counted) : std::nan("");
}

void preflight_training(const Spec& spec) {
  preflight(spec);
  const int64_t steps = step_plan(spec.train, spec.data.train_samples).total();
  for (Precision p : spec.precisions) {
    // Host: StepRecord and its time; device: four floats; amp_fp8: an amax and a scale per FP8
    // tensor on both.
    const int64_t fp8 =
        precision_info(p).fp8_linears ? fp8_tensors(Model(spec, p).layer_infos()) : 0;
    const double bytes = double(steps) * (sizeof(StepRecord) + 4 + 16 + 16.0 * double(fp8));
    if (bytes > kMaxSeriesBytes)
      throw_bad_input(fmt::format(
          "{}: train: {} steps ({} warm-up) in {} would keep {:.1f} GiB of per-step series in "
          "memory, more than the {:.0f} GiB allowed; train fewer steps (warmup_steps, epochs, "
          "train_samples / batch_size)",
          spec.source_path, steps, spec.train.warmup_steps, precision_name(p),
          bytes / double(1 << 30), kMaxSeriesBytes / double(1 << 30)));
  }
}

MemoryReport predict_training_memory(const Spec& spec, Precision precision, Backend& be) {
  TrackingAllocator count(be, TrackingAllocator::Mode::Count);
  const TrainingBuffers b = allocate_training(spec, precision, count, be, 0);
  MemoryReport m;
  m.training_peak = count.peak_training();
  m.tracked_peak = count.peak_total();
  for (int c = 0; c < kMemCategoryCount; ++c)
    m.by_category[c] = count.peak(static_cast<MemCategory>(c));
  return m;
}

RunResult train_and_measure(const Spec& spec, const Dataset& data, Precision precision, Backend& be,
                            const TrainOptions& opts) {
  RunResult r;
  r.model = spec.name;
  r.family = spec.family;
  r.precision = precision_name(precision);
  r.seed = opts.seed;
  r.device = be.info().kind;  // "cuda", "cpu" (native) or "reference"
  r.batch_size = spec.train.batch_size;
  r.train_samples = data.train_size();
  if (auto why = unsupported_reason(precision, be.device(), be.info())) {
    r.status = RunStatus::Unsupported;  // trains nothing: no warm-up steps either
    r.status_detail = *why;
    if (opts.data_parallel) r.data_parallel = opts.data_parallel->setup();
    return r;
  }
  r.warmup_steps = spec.train.warmup_steps;
  // The run's warnings are its own: what work before it left (a run that threw bad input or was
  // interrupted, work outside any run) is dropped.
  be.take_warnings();
  // Running out of memory or a runtime failure in one mode is that mode's row, and the other
  // modes still get their turn (the run's buffers are freed as `run` unwinds).
  auto failed = [&](const std::exception& e, bool oom, const std::string& detail, size_t needed) {
    // One rank's failure the others cannot know of: they would wait in the next all-reduce.
    if (opts.data_parallel)
      opts.data_parallel->fail(e, fmt::format("{} {}: {}", spec.name, precision_name(precision),
                                              oom ? "oom" : "failed"));
    r.status = oom ? RunStatus::Oom : RunStatus::Failed;
    r.status_detail = detail;
    r.oom_needed_bytes = needed;
    try {
      be.synchronize();
    } catch (const std::exception&) {
      // The device may be unusable after the failure; the next mode will say so in its own row.
    }
  };
  try {
    r.predicted_memory = predict_training_memory(spec, precision, be);
    r.has_predicted_memory = true;
    Run run(spec, data, precision, be, opts);
    run.execute(r);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::BadInput) throw;  // the user's to fix: it stops everything
    failed(e, e.is_oom(), e.what(), e.needed_bytes());
  } catch (const std::bad_alloc& e) {
    // An allocation outside the tracked buffers (a library's, a container's) that the host
    // refused: that mode did not fit.
    failed(e, true, "the host refused an untracked allocation (std::bad_alloc)", 0);
  } catch (const std::exception& e) {
    // A library's own exception (oneDNN's dnnl::error) that no op turned into an Error.
    failed(e, false, fmt::format("internal error: {}", e.what()), 0);
  }
  r.warnings = be.take_warnings();
  return r;
}

}  // namespace mpbench
