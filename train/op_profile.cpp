#include "train/op_profile.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include "train/device_specs.h"

namespace mpbench {

namespace {

// Pending event pairs kept before they are read back: bounds the events alive at once (a long
// profile of a small model enqueues many thousands of ops) at the cost of one wait per batch.
constexpr size_t kMaxPending = 4096;

// The median and mean of a profile's step times.
void set_step_stats(ProfiledRun& r) {
  const TimeStats st = compute_time_stats(r.step_times_ms);
  r.step_ms = st.median;
  r.step_mean_ms = st.mean;
}

}  // namespace

ProfiledRun profile_training(const Spec& spec, const Dataset& data, Precision p, int64_t steps,
                             Backend& be, TrainOptions opts) {
  ProfiledRun out;
  OpProfiler prof(be);  // detached again when it goes out of scope
  const int64_t warmup = spec.train.warmup_steps;
  opts.layer_observer = &prof;
  // The first `steps` training steps after the warm-up are timed; warm-up and evaluation not.
  opts.on_phase = [&](TrainPhase phase) {
    const bool timed = phase == TrainPhase::Step && out.steps < steps;
    if (timed) {
      ++out.steps;
      prof.next_step();
    }
    prof.set_enabled(timed);
  };
  out.run = train_and_measure(spec, data, p, be, opts);
  if (out.run.status != RunStatus::Ok) return out;
  out.ops = prof.collect();
  // The profiled steps: the first `steps` after the warm-up.
  const int64_t end = std::min<int64_t>(warmup + out.steps, out.run.steps.size());
  for (int64_t i = warmup; i < end; ++i)
    if (!std::isnan(out.run.steps[i].time_ms))
      out.step_times_ms.push_back(out.run.steps[i].time_ms);
  set_step_stats(out);
  return out;
}

std::vector<double> per_step_ms(const OpTotal& o, int64_t steps) {
  const size_t n = static_cast<size_t>(std::max<int64_t>(steps, 1));
  if (o.step_ms.empty()) return std::vector<double>(n, o.ms / static_cast<double>(n));
  std::vector<double> t = o.step_ms;
  t.resize(std::max(n, t.size()), 0.0);
  return t;
}

ProfiledRun pool_rounds(const std::vector<ProfiledRun>& rounds) {
  MPB_CHECK(!rounds.empty(), "pool_rounds: no rounds");
  for (const ProfiledRun& r : rounds)
    if (r.run.status != RunStatus::Ok) return r;
  ProfiledRun out;
  out.run = rounds.front().run;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
  for (const ProfiledRun& r : rounds) {
    const auto steps = static_cast<size_t>(r.steps);
    for (const OpTotal& o : r.ops) {
      auto [it, fresh] = index.try_emplace({o.scope, o.op, o.detail}, out.ops.size());
      if (fresh) {
        out.ops.push_back(o);
        out.ops.back().calls = 0;
        out.ops.back().ms = out.ops.back().flops = out.ops.back().bytes = 0;
        out.ops.back().step_ms.clear();
      }
      OpTotal& t = out.ops[it->second];
      t.calls += o.calls;
      t.ms += o.ms;
      t.flops += o.flops;
      t.bytes += o.bytes;
      if (t.kernel.empty()) t.kernel = o.kernel;
      t.step_ms.resize(static_cast<size_t>(out.steps), 0.0);  // zeros in earlier rounds
      const std::vector<double> times = per_step_ms(o, r.steps);
      t.step_ms.insert(t.step_ms.end(), times.begin(), times.end());
      t.step_ms.resize(static_cast<size_t>(out.steps) + steps, 0.0);
    }
    out.steps += r.steps;
    if (&r != &rounds.front()) out.run.skipped_steps += r.run.skipped_steps;
    out.step_times_ms.insert(out.step_times_ms.end(), r.step_times_ms.begin(),
                             r.step_times_ms.end());
  }
  for (OpTotal& t : out.ops) t.step_ms.resize(static_cast<size_t>(out.steps), 0.0);
  set_step_stats(out);
  return out;
}

std::optional<double> percent_of_ceiling(const OpTotal& op, const Ceilings& c) {
  // The all-reduce's bytes cross the interconnect, which no ceiling here describes.
  if (!(op.ms > 0) || op.op == "all_reduce") return std::nullopt;
  const double seconds = op.ms * 1e-3;
  if (op.flops > 0 && c.peak_tflops > 0) return 100.0 * op.flops / seconds / (c.peak_tflops * 1e12);
  if (op.bytes > 0 && c.memory_gbps > 0) return 100.0 * op.bytes / seconds / (c.memory_gbps * 1e9);
  return std::nullopt;
}

void OpProfiler::on_layer(const std::string& layer, bool backward) {
  scope_ = layer.empty() ? "step" : layer + (backward ? " bwd" : " fwd");
}

OpProfiler::OpProfiler(Backend& be) : be_(be) {
  MPB_CHECK(be.observer() == nullptr, "the backend is already observed");
  be.set_observer(this);
}

OpProfiler::~OpProfiler() {
  be_.set_observer(nullptr);
}

std::unique_ptr<Event> OpProfiler::take_event() {
  if (spare_.empty()) return be_.create_event();
  auto e = std::move(spare_.back());
  spare_.pop_back();
  return e;
}

void OpProfiler::op_begin(const OpCall& call) {
  auto [it, inserted] = index_.try_emplace(
      std::make_tuple(scope_, std::string(call.op), call.detail), totals_.size());
  if (inserted) {
    OpTotal t;
    t.scope = scope_;
    t.op = call.op;
    t.detail = call.detail;
    totals_.push_back(std::move(t));
  }
  OpTotal& total = totals_[it->second];
  total.calls += 1;
  total.flops += call.flops;
  total.bytes += call.bytes;
  // An op that threw before op_end leaves its events behind; they are reused.
  if (running_) {
    spare_.push_back(std::move(running_->start));
    spare_.push_back(std::move(running_->stop));
  }
  running_ = Pending{it->second, steps_ > 0 ? steps_ - 1 : 0, take_event(), take_event()};
  running_->start->record();
}

void OpProfiler::op_end() {
  MPB_CHECK(running_.has_value(), "op_end without op_begin");
  running_->stop->record();
  if (!be_.last_kernel().empty()) totals_[running_->total].kernel = be_.last_kernel();
  pending_.push_back(std::move(*running_));
  running_.reset();
  if (pending_.size() >= kMaxPending) resolve();
}

void OpProfiler::resolve() {
  for (auto& p : pending_) {
    const double ms = p.stop->elapsed_ms(*p.start);
    OpTotal& t = totals_[p.total];
    t.ms += ms;
    if (t.step_ms.size() <= p.step) t.step_ms.resize(p.step + 1, 0.0);
    t.step_ms[p.step] += ms;
    spare_.push_back(std::move(p.start));
    spare_.push_back(std::move(p.stop));
  }
  pending_.clear();
}

std::vector<OpTotal> OpProfiler::collect() {
  resolve();
  for (OpTotal& t : totals_) t.step_ms.resize(std::max<size_t>(steps_, t.step_ms.size()), 0.0);
  return totals_;
}

}  // namespace mpbench
