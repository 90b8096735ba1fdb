#include "train/explain.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "train/number_text.h"
#include "train/statistics.h"

namespace mpbench {

namespace {

// An op whose median step is this much slower in the low-precision mode, by at least this share
// of the baseline's median step, and slower across the steps at this family-wise level (a
// one-sided rank test per op, Holm's correction over the ops), is named.
constexpr double kSlowerRatio = 1.05;
// GEMMs/convolutions this much faster than the bound's peak ratio gives them are said to be.
constexpr double kBeatPeaksBy = 1.05;
constexpr double kSlowerShareOfStep = 0.01;
constexpr double kSlowerAlpha = 0.05;
constexpr size_t kMaxNamed = 5;

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

// Per-step sum of an OpTotal field (ms, bytes) over each kind's ops.
std::array<double, kOpKindCount> per_kind(const ProfiledRun& r, double OpTotal::*field) {
  std::array<double, kOpKindCount> t{};
  const double steps = static_cast<double>(std::max<int64_t>(r.steps, 1));
  for (const OpTotal& o : r.ops) t[static_cast<int>(op_kind(o.op))] += o.*field / steps;
  return t;
}

// Per-step time of each kind, host gaps being the step time the ops do not account for.
std::array<double, kOpKindCount> kind_times(const ProfiledRun& r) {
  std::array<double, kOpKindCount> t = per_kind(r, &OpTotal::ms);
  double ops = 0;
  for (double ms : t) ops += ms;
  t[static_cast<int>(OpKind::HostGaps)] = std::max(0.0, r.step_mean_ms - ops);
  return t;
}

// Adds an op's time in each of a run's profiled steps (per_step_ms) to `sum`.
void add_steps(std::vector<double>& sum, const OpTotal& o, int64_t steps) {
  const std::vector<double> t = per_step_ms(o, steps);
  sum.resize(std::max(sum.size(), t.size()), 0.0);
  for (size_t i = 0; i < t.size(); ++i) sum[i] += t[i];
}

std::string named_list(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < kMaxNamed; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > kMaxNamed) s += fmt::format(" and {} more", items.size() - kMaxNamed);
  return s;
}

// A GEMM's or convolution's detail ("128x64x64 b4 bf16->fp32 +bias", "(8, 56, 56, 64) k64 3x3/s1
// fp32") as its shapes (the tokens before the first dtype) and whether it runs in strict fp32:
// fp32 operands without " tf32".
struct MatmulDetail {
  std::string shapes;
  bool strict_fp32 = false;
};
MatmulDetail matmul_detail(const std::string& detail) {
  MatmulDetail out;
  size_t at = 0;
  while (at <= detail.size()) {
    const size_t end = std::min(detail.find(' ', at), detail.size());
    const std::string token = detail.substr(at, end - at);
    const std::string dtype = token.substr(0, token.find_first_of("-/"));
    if (dtype == "fp32" || dtype == "bf16" || dtype == "fp16" || starts_with(dtype, "fp8")) {
      out.shapes = detail.substr(0, at);
      out.strict_fp32 = dtype == "fp32" && detail.find(" tf32") == std::string::npos;
      return out;
    }
    at = end + 1;
  }
  out.shapes = detail;
  return out;
}

// The rate `to` runs each of the baseline's GEMMs and convolutions at (matmul_rate), matched
// by scope, op and shapes (the dtypes differ). Where `to` ran one both ways, strict fp32 wins
// (none of the mode's speedup applies), then FP8; one `to` did not run is neither.
class ToRates {
 public:
  ToRates(const ProfiledRun& to, Precision p)
      : unmatched_(precision_info(p).fp8_linears ? MatmulRate::NonFp8 : MatmulRate::Mode) {
    auto rank = [](MatmulRate r) {
      return r == MatmulRate::StrictFp32 ? 0 : r == MatmulRate::Mode ? 1 : 2;
    };
    for (const OpTotal& o : to.ops) {
      if (op_kind(o.op) != OpKind::Matmul) continue;
      const MatmulRate r = matmul_rate(o, p);
      const auto [it, fresh] = rates_.try_emplace(key(o), r);
      if (!fresh && rank(r) < rank(it->second)) it->second = r;
    }
  }
  MatmulRate of(const OpTotal& from_op) const {
    const auto it = rates_.find(key(from_op));
    return it == rates_.end() ? unmatched_ : it->second;
  }

 private:
  using Key = std::tuple<std::string, std::string, std::string>;  // scope, op, shapes
  static Key key(const OpTotal& o) { return {o.scope, o.op, matmul_detail(o.detail).shapes}; }
  std::map<Key, MatmulRate> rates_;
  MatmulRate unmatched_;
};

// The baseline's GEMM and convolution time per step at the target's peaks: each op divided by
// the peak ratio, except that one `to` runs in strict fp32 keeps its time, and one of amp_fp8's
// that takes no FP8 inputs gets the bf16 rate's ratio (non_fp8_gemm_peak_tflops, where known).
double matmul_bound(const ProfiledRun& from, const ModeContext& from_ctx, const ModeContext& to_ctx,
                    double peak_ratio, const ToRates& rates) {
  const double non_fp8 = to_ctx.non_fp8_gemm_peak_tflops;
  const double steps = static_cast<double>(std::max<int64_t>(from.steps, 1));
  double best = 0;
  for (const OpTotal& o : from.ops) {
    if (op_kind(o.op) != OpKind::Matmul) continue;
    const MatmulRate r = rates.of(o);
    const double ratio = r == MatmulRate::StrictFp32 ? 1.0
                         : r == MatmulRate::NonFp8 && non_fp8 > 0
                             ? non_fp8 / from_ctx.ceilings->peak_tflops
                             : peak_ratio;
    best += o.ms / steps / ratio;
  }
  return best;
}

using OpKey = std::pair<std::string, std::string>;  // (scope, op): the dtypes in details differ
struct SlowerOp {
  double delta = 0;        // ms per step, median against median
  std::string text;        // "layer1 fwd gemm +0.500 ms (1.25x slower)"
  bool confirmed = false;  // by the rank test across the steps, Holm-corrected over the ops
  bool is_new = false;     // absent from the baseline: confirmed by the model's structure
};

// The ops whose median step in `to` grew by kSlowerRatio and a share of the baseline step, each
// confirmed when a rank test finds it slower across the profiled steps rather than in a slow
// spell; Holm's correction holds the chance that noise confirms any op to kSlowerAlpha over all
// the ops compared.
std::map<OpKey, SlowerOp> slower_ops(const ProfiledRun& from, const ProfiledRun& to,
                                     const std::string& to_name) {
  std::map<OpKey, std::pair<std::vector<double>, std::vector<double>>> per_op;
  for (const OpTotal& o : from.ops) add_steps(per_op[{o.scope, o.op}].first, o, from.steps);
  for (const OpTotal& o : to.ops) add_steps(per_op[{o.scope, o.op}].second, o, to.steps);
  std::map<OpKey, SlowerOp> slower;
  std::map<OpKey, double> p_of;
  std::vector<double> ps;
  std::set<OpKey> new_ops;  // absent from the baseline: new by the model's structure, not noise
  for (auto& [key, t] : per_op) {
    if (t.first.empty()) {
      new_ops.insert(key);
      t.first.assign(static_cast<size_t>(std::max<int64_t>(from.steps, 1)), 0);
    }
    if (t.second.empty()) t.second.assign(static_cast<size_t>(std::max<int64_t>(to.steps, 1)), 0);
    ps.push_back(p_of[key] = rank_test_greater_p(t.first, t.second));
    const double a = compute_time_stats(t.first).median, b = compute_time_stats(t.second).median;
    if (b > kSlowerRatio * a && b - a > kSlowerShareOfStep * from.step_ms)
      slower[key] = {b - a, a > 0 ? fmt::format("{} {} +{} ms ({:.2f}x slower)", key.first,
                                                key.second, format_op_ms(b - a), b / a)
                                  : fmt::format("{} {} +{} ms (new in {})", key.first, key.second,
                                                format_op_ms(b - a), to_name)};
  }
  std::sort(ps.begin(), ps.end());
  double holm_fails = std::numeric_limits<double>::infinity();  // the first p Holm keeps
  for (size_t k = 0; k < ps.size(); ++k)
    if (ps[k] > kSlowerAlpha / static_cast<double>(ps.size() - k)) {
      holm_fails = ps[k];
      break;
    }
  for (auto& [key, s] : slower) {
    s.is_new = new_ops.count(key) > 0;
    s.confirmed = p_of[key] < holm_fails || s.is_new;
  }
  return slower;
}

}  // namespace

const char* op_kind_name(OpKind k) {
  static const char* const names[kOpKindCount] = {"gemm/conv",   "normalisation", "softmax",
                                                  "elementwise", "optimizer",     "loss",
                                                  "copies",      "communication", "host gaps"};
  return names[static_cast<int>(k)];
}

MatmulRate matmul_rate(const OpTotal& o, Precision p) {
  const PrecisionInfo& info = precision_info(p);
  if (info.compute_dtype != DType::F32 && matmul_detail(o.detail).strict_fp32)
    return MatmulRate::StrictFp32;
  if (info.fp8_linears && !(o.op == "gemm" && o.detail.find("fp8") != std::string::npos))
    return MatmulRate::NonFp8;
  return MatmulRate::Mode;
}

double matmul_peak_tflops(const DeviceInfo& device, Precision p, MatmulRate r) {
  const Precision at = r == MatmulRate::StrictFp32 ? Precision::FP32
                       : r == MatmulRate::NonFp8   ? Precision::AMP_BF16
                                                   : p;
  const std::optional<Ceilings> c = ceilings_for(device, at);
  return c ? c->peak_tflops : 0.0;
}

OpKind op_kind(const std::string& op) {
  if (op == "gemm" || starts_with(op, "conv2d")) return OpKind::Matmul;
  if (starts_with(op, "batchnorm") || starts_with(op, "layernorm")) return OpKind::Normalisation;
  if (starts_with(op, "attention_softmax")) return OpKind::Softmax;
  if (op == "softmax_xent") return OpKind::Loss;
  if (op == "all_reduce") return OpKind::Communication;
  if (op == "adamw_step" || op == "sgd_step" || op == "unscale_check_norm" ||
      op == "update_loss_scale" || op == "count_step" || op == "fp8_update_scaling")
    return OpKind::Optimizer;
  if (op == "cast" || op == "cast_to_fp8" || op == "copy" || op == "permute" || op == "fill")
    return OpKind::Copies;
  return OpKind::Elementwise;  // bias/activation, add, pools, embedding
}

ModeComparison compare_modes(const ProfiledRun& from, const ModeContext& from_ctx,
                             const ProfiledRun& to, const ModeContext& to_ctx,
                             const std::vector<RoundPair>& rounds) {
  MPB_CHECK(from.run.status == RunStatus::Ok && to.run.status == RunStatus::Ok,
            "explain: {} and {} must both have trained", from.run.precision, to.run.precision);
  ModeComparison c;
  c.from = precision_name(from_ctx.precision);
  c.to = precision_name(to_ctx.precision);
  c.from_step_ms = from.step_mean_ms;
  c.to_step_ms = to.step_mean_ms;
  c.measured_speedup = to.step_mean_ms > 0 ? from.step_mean_ms / to.step_mean_ms : 0;
  const auto tf = kind_times(from), tt = kind_times(to);
  for (int k = 0; k < kOpKindCount; ++k)
    c.by_kind.push_back({static_cast<OpKind>(k), tf[k], tt[k]});
  // Eligible: the baseline's GEMMs and convolutions that `to` does not run in strict fp32.
  const ToRates rates(to, to_ctx.precision);
  const double steps = static_cast<double>(std::max<int64_t>(from.steps, 1));
  double eligible = 0, pinned = 0;
  for (const OpTotal& o : from.ops)
    if (op_kind(o.op) == OpKind::Matmul)
      (rates.of(o) == MatmulRate::StrictFp32 ? pinned : eligible) += o.ms / steps;
  c.eligible_fraction = from.step_mean_ms > 0 ? eligible / from.step_mean_ms : 0;
  c.fp32_matmul_fraction = from.step_mean_ms > 0 ? pinned / from.step_mean_ms : 0;

  // The baseline's GEMM/conv time per step at the peak ratio, and its whole step by the bound.
  double matmul_at_peaks = 0, bound_ms = 0;
  if (from_ctx.ceilings && to_ctx.ceilings && from_ctx.ceilings->peak_tflops > 0 &&
      to_ctx.ceilings->peak_tflops > 0) {
    c.peak_ratio = to_ctx.ceilings->peak_tflops / from_ctx.ceilings->peak_tflops;
    // A memory-bound kind is sped up by the bytes its ops move in `from` over those in `to`, as
    // the profiler counts them (an op on fp32 in both modes saves nothing; casts add bytes),
    // and where a run records none, by the compute dtypes' sizes.
    const double dtype_ratio =
        static_cast<double>(dtype_size(precision_info(from_ctx.precision).compute_dtype)) /
        static_cast<double>(dtype_size(precision_info(to_ctx.precision).compute_dtype));
    const auto bf = per_kind(from, &OpTotal::bytes), bt = per_kind(to, &OpTotal::bytes);
    matmul_at_peaks = matmul_bound(from, from_ctx, to_ctx, *c.peak_ratio, rates);
    bound_ms = matmul_at_peaks;
    for (int k = 0; k < kOpKindCount; ++k) {
      const auto kind = static_cast<OpKind>(k);
      if (kind == OpKind::Matmul) continue;  // counted above
      if (kind == OpKind::Optimizer || kind == OpKind::Communication || kind == OpKind::HostGaps)
        bound_ms += tf[k];
      else
        // At least 1: a bound. A kind whose bytes grow (casts, the weight gradients' rounding) is
        // taken as no faster, not as slower: its ops are small, launch-bound as often as not,
        // and slowing them by the bytes put the bound under a measured speedup (tiny_mlp: 1.01x
        // against 1.07x).
        bound_ms += tf[k] / std::max(1.0, bf[k] > 0 && bt[k] > 0 ? bf[k] / bt[k] : dtype_ratio);
    }
    if (bound_ms > 0) c.bound = from.step_mean_ms / bound_ms;
  }

  // The bound gives every GEMM and convolution the peaks' ratio, which is one size's on the
  // native CPU (its ceilings are one square matmul's): GEMMs of other shapes gain more or lose
  // less there (fc1's bf16 converted in software: 0.64x against the ceilings' 0.35x; ResNet's
  // convolutions 2.1x against 1.8x). Said as such, and the measured speedup is held against the
  // bound with the GEMMs at their measured time before anything else is blamed. A baseline whose
  // GEMMs were slowed too (a busy machine) looks the same from the profile: the flag names both.
  const double matmul_to = tt[static_cast<int>(OpKind::Matmul)];
  const bool matmuls_beat_peaks =
      c.bound && matmul_to > 0 && matmul_to * kBeatPeaksBy < matmul_at_peaks;
  if (matmuls_beat_peaks)
    c.flags.push_back(fmt::format(
        "{}'s GEMMs/convolutions took {} ms a step, less than the {} ms the bound gives them at "
        "the peaks' {:.2f}x ({}): either GEMMs of these shapes reach another ratio (the bound is "
        "then low by that much) or {}'s were slowed by something else (a busy machine? explain "
        "again)",
        c.to, format_op_ms(matmul_to), format_op_ms(matmul_at_peaks), *c.peak_ratio,
        to_ctx.gpu ? "the datasheet's" : "the ceilings measured on one square matmul", c.from));
  const double bound_at_measured_matmuls =
      matmuls_beat_peaks ? from.step_mean_ms / (bound_ms - matmul_at_peaks + matmul_to)
                         : c.bound.value_or(0);
  if (c.bound && c.measured_speedup > kBoundSlack * bound_at_measured_matmuls)
    c.flags.push_back(fmt::format(
        "the measured {:.2f}x is {:.1f} times the {:.2f}x bound{}, more than the modes' work can "
        "give: {}'s profiled steps were slowed by something else (a busy machine? clocks?). "
        "Explain again, with more --steps, on a quieter machine",
        c.measured_speedup, c.measured_speedup / bound_at_measured_matmuls,
        bound_at_measured_matmuls,
        matmuls_beat_peaks ? " with the GEMMs at their measured time" : "", c.from));
  // Flags: what usually explains a speedup below the bound.
  if (!to_ctx.misaligned.empty())
    c.flags.push_back(
        fmt::format("{} sizes off {}'s tensor-core multiple of {}: {}",
                    to_ctx.misaligned_matmuls == 1
                        ? "1 GEMM/convolution has"
                        : fmt::format("{} GEMMs/convolutions have", to_ctx.misaligned_matmuls),
                    c.to, precision_info(to_ctx.precision).tensor_core_multiple,
                    named_list(to_ctx.misaligned)));
  for (const ModeContext* m : {&from_ctx, &to_ctx}) {
    std::vector<std::string> ops;
    for (const auto& [op, calls] : m->fallback_calls)
      if (calls > 0) ops.push_back(fmt::format("{} ({} calls)", op, calls));
    if (!ops.empty())
      c.flags.push_back(
          fmt::format("{}: ops on a fallback path, {}: {} in {} (warm-up, "
                      "profiled steps and evaluations)",
                      precision_name(m->precision), m->fallback_path, named_list(ops),
                      rounds.size() >= 2 ? fmt::format("the {} runs", rounds.size()) : "the run"));
  }
  const int gaps = static_cast<int>(OpKind::HostGaps);
  for (const auto& [r, t, ctx] :
       {std::tuple{&from, &tf, &from_ctx}, std::tuple{&to, &tt, &to_ctx}}) {
    if (r->step_mean_ms > 0 && (*t)[gaps] > kLaunchBoundShare * r->step_mean_ms)
      c.flags.push_back(fmt::format(
          "{} is {}: {:.0f}% of its step is host time between ops (try {}a larger batch)",
          r->run.precision, ctx->gpu ? "launch-bound" : "host-overhead-bound",
          100.0 * (*t)[gaps] / r->step_mean_ms, ctx->cuda_graphs ? "--cuda-graphs, or " : ""));
  }
  const double comm = tt[static_cast<int>(OpKind::Communication)];
  if (to.step_mean_ms > 0 && comm > kCommunicationBoundShare * to.step_mean_ms)
    c.flags.push_back(fmt::format(
        "{} spends {:.0f}% of its step in the gradients' all-reduce over {} ranks ({}), the same "
        "bytes in every mode{}",
        c.to, 100.0 * comm / to.step_mean_ms, to_ctx.ranks,
        to_ctx.grad_reduce.empty() ? "fp32" : to_ctx.grad_reduce,
        to_ctx.grad_reduce == "fp32" || to_ctx.grad_reduce.empty()
            ? ": --grad-reduce bf16 halves them"
            : ""));
  // A mode whose threads waited for CPUs that something else held (its runs' host_load, any
  // round's) is slowed as steadily as by its own work: the profile cannot tell them apart.
  std::vector<std::string> busy;
  for (const auto& [mine, pick] :
       {std::pair{&from, &RoundPair::first}, std::pair{&to, &RoundPair::second}}) {
    std::vector<const RunResult*> runs = {&mine->run};
    for (const RoundPair& r : rounds) runs.push_back(&(r.*pick)->run);
    if (const HostLoad* worst = worst_busy_load(runs))
      busy.push_back(fmt::format("{} ({})", mine->run.precision, worst->describe()));
  }
  if (!busy.empty())
    c.flags.push_back(fmt::format(
        "a busy machine: {}: the times and the speedup from them are unreliable. Explain again "
        "on a quieter machine",
        fmt::join(busy, " and ")));
  // The comparison rests on means (what the kinds add up to); a stalled step moves them.
  // One flag however many of the two were uneven: the medians' speedup is one figure.
  std::string uneven;
  for (const ProfiledRun* r : {&from, &to})
    if (uneven_steps(*r))
      uneven += fmt::format(
          "{}{}'s profiled steps were uneven: mean {:.3f} ms against a median of "
          "{:.3f} ms",
          uneven.empty() ? "" : "; ", r->run.precision, r->step_mean_ms, r->step_ms);
  if (!uneven.empty())
    c.flags.push_back(fmt::format(
        "{} (a stalled step: a busy machine?); the figures above are means: by medians the "
        "measured speedup is {}x. Explain again with more --steps, or on a quieter machine",
        uneven, format_ratio(to.step_ms > 0 ? from.step_ms / to.step_ms : 0.0)));
  if (to.run.skipped_steps > 0)
    c.flags.push_back(
        fmt::format("{}: the loss scaler skipped {} steps of {}", c.to, to.run.skipped_steps,
                    rounds.size() >= 2 ? fmt::format("the {} runs", rounds.size()) : "the run"));
  // Ops slower in `to`: by the pooled steps' medians and the rank test over them; with rounds,
  // also slower by the median in each round, so that one slow run cannot name an op.
  const std::map<OpKey, SlowerOp> pooled = slower_ops(from, to, c.to);
  std::vector<std::map<OpKey, SlowerOp>> per_round;
  if (rounds.size() >= 2)
    for (const auto& [f, t] : rounds) per_round.push_back(slower_ops(*f, *t, c.to));
  std::vector<std::pair<double, std::string>> named, unsure;
  bool only_new = true;  // every named op is new: no rank test said anything
  for (const auto& [key, s] : pooled) {
    bool confirmed = s.confirmed;
    for (const auto& round : per_round) confirmed = confirmed && round.count(key) > 0;
    (confirmed ? named : unsure).push_back({s.delta, s.text});
    if (confirmed && !s.is_new) only_new = false;
  }
  auto texts = [](std::vector<std::pair<double, std::string>>& v) {
    std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) { return x.first > y.first; });
    std::vector<std::string> t;
    for (auto& [delta, text] : v) t.push_back(std::move(text));
    return named_list(t);
  };
  if (!named.empty())
    c.flags.push_back(
        only_new ? fmt::format("new in {} (ops {} does not run; per-step medians): {}", c.to,
                               c.from, texts(named))
        : per_round.empty()
            ? fmt::format("slower or new in {} (per-step medians; slower across the profiled "
                          "steps by a rank test, though a whole run can be slow: explain again, "
                          "or --repeat, to confirm): {}",
                          c.to, texts(named))
            : fmt::format("slower or new in {} (per-step medians; slower across the {} "
                          "interleaved rounds' steps by a rank test, and by the median in each "
                          "round): {}",
                          c.to, per_round.size(), texts(named)));
  if (!unsure.empty())
    c.flags.push_back(fmt::format(
        "by the median only, not across the profiled steps{} (noise can do that; more --steps "
        "tell it apart), slower or new in {}: {}",
        per_round.empty() ? "" : fmt::format(" or not in each of the {} rounds", per_round.size()),
        c.to, texts(unsure)));
  return c;
}

}  // namespace mpbench
