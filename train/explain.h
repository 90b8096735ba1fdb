#pragma once
// Why a mode helped or didn't (`mpbench explain`): a baseline mode's profiled run against
// another's, by op kind, with the share of the baseline step that tensor cores can speed up, the
// Amdahl bound it implies, and flags for what usually explains a small speedup (misaligned
// sizes, a fallback kernel, host gaps, loss-scale skips, ops that got slower).
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "train/op_profile.h"

namespace mpbench {

// What a Backend op is, for the comparison: GEMMs and convolutions are what tensor cores run;
// the memory-bound kinds move half the bytes in a 16-bit mode; host gaps are the step's time
// between ops (launch overhead, host work), which no precision changes. Communication is a
// data-parallel run's gradient all-reduce: the same bytes in every mode (--grad-reduce sets them).
enum class OpKind {
  Matmul,
  Normalisation,
  Softmax,
  Elementwise,
  Optimizer,
  Loss,
  Copies,
  Communication,
  HostGaps
};
constexpr int kOpKindCount = 9;
const char* op_kind_name(OpKind k);  // "gemm/conv", "normalisation", ..., "host gaps"
// The kind of an op by its Backend method name ("gemm", "layernorm_backward", ...).
OpKind op_kind(const std::string& op);

struct KindTimes {
  OpKind kind;
  double from_ms = 0, to_ms = 0;  // per step
};

// Over this share of a step in host gaps, a step is launch-bound (CUDA graphs would help).
constexpr double kLaunchBoundShare = 0.2;
// Over this share of the low-precision step in the all-reduce, communication is named as what
// holds the speedup back.
constexpr double kCommunicationBoundShare = 0.1;
// A measured speedup over this many times the bound is flagged: the modes' work cannot give it, so
// the baseline's steps were slowed by something else (the bound's model is rough: 1.07x measured
// against 1.01x was seen on a quiet machine).
constexpr double kBoundSlack = 1.25;

struct ModeComparison {
  std::string from, to;  // precision names
  // The mean of each mode's profiled steps (events between steps), which its kinds add up to.
  double from_step_ms = 0, to_step_ms = 0;
  double measured_speedup = 0;  // from_step_ms / to_step_ms
  // Of the baseline step: the GEMMs and convolutions `to` runs in low precision (eligible), and
  // those it runs in strict fp32 all the same (a layer fp32_layers pins), which the bound keeps.
  double eligible_fraction = 0;
  double fp32_matmul_fraction = 0;
  // The card's dense peak of `to` over `from`'s (train/device_specs.h); absent without a
  // datasheet (the CPU, an unknown card), and then so is the bound.
  std::optional<double> peak_ratio;
  // Amdahl: the baseline step with its GEMMs and convolutions sped up by peak_ratio (those `to`
  // runs at another rate, matmul_rate, by theirs), each memory-bound kind (normalisation,
  // softmax, elementwise, loss, copies) by its bytes per step in `from` over those in `to` (the
  // compute dtypes' size ratio where either run has none; at least 1: a kind whose bytes grow,
  // casts, is taken as no faster), and the optimizer (fp32 in every mode), host gaps and
  // communication as they are.
  std::optional<double> bound;
  std::vector<KindTimes> by_kind;  // every kind, host gaps last
  std::vector<std::string> flags;
};

// What compare_modes needs of one mode besides its profile.
struct ModeContext {
  Precision precision = Precision::FP32;
  std::optional<Ceilings> ceilings;
  // The sizes of the model's GEMMs and convolutions that are off the mode's tensor-core multiple
  // ("head N=50257"), as inspect finds them (models/model.h), and how many GEMMs and
  // convolutions they belong to. None on the native CPU, which has no tensor cores.
  std::vector<std::string> misaligned;
  int misaligned_matmuls = 0;
  // Calls by op that ran on a fallback path in the mode's run (warm-up, profiled steps and
  // evaluations), and what that path is (Backend::fallback_calls, fallback_path).
  std::map<std::string, int64_t> fallback_calls;
  std::string fallback_path;
  // amp_fp8: the peak of its GEMMs that do not run in FP8 (MatmulRate::NonFp8: attention's,
  // convolutions, a Linear whose sizes are off 16), the bf16 rate. 0: every GEMM is held to
  // ceilings->peak_tflops.
  double non_fp8_gemm_peak_tflops = 0;
  // Data parallel: the ranks and the all-reduce's dtype (--grad-reduce); 1 and "" for one
  // process.
  int ranks = 1;
  std::string grad_reduce;
  // Whether `run --cuda-graphs` would capture the mode's steps (a GPU, one process): a
  // launch-bound step is told to try it only then.
  bool cuda_graphs = false;
  // Whether the ops are kernel launches (a GPU): the time between them is then launch overhead;
  // on a CPU it is the host's own time between ops.
  bool gpu = false;
};

// The rate a GEMM or convolution of a run in mode p computes at, by its detail: StrictFp32 for
// fp32 operands without " tf32" in a mode whose own is not fp32 (a layer fp32_layers pins),
// NonFp8 for one of amp_fp8's that takes no FP8 inputs (attention's GEMMs, convolutions, a Linear
// off 16), which runs at the bf16 rate; else the mode's own. explain's bound and profile's "of
// peak" both hold an op to it.
enum class MatmulRate { Mode, StrictFp32, NonFp8 };
MatmulRate matmul_rate(const OpTotal& o, Precision p);
// The ceiling of that rate on a device (ceilings_for): the mode's, fp32's, or amp_bf16's; 0
// where there is none.
double matmul_peak_tflops(const DeviceInfo& device, Precision p, MatmulRate r);

// The comparison of `to` against the baseline `from`; both runs must be Ok. With `rounds` (the
// profiles that from and to pool, pool_rounds, as (from, to) pairs of interleaved rounds), an op
// confirmed slower over the pooled steps is named only when its median is slower in every round
// too; a slow run then names nothing.
using RoundPair = std::pair<const ProfiledRun*, const ProfiledRun*>;
ModeComparison compare_modes(const ProfiledRun& from, const ModeContext& from_ctx,
                             const ProfiledRun& to, const ModeContext& to_ctx,
                             const std::vector<RoundPair>& rounds = {});

}  // namespace mpbench
