// libFuzzer target: "what mpbench writes, mpbench reads" (issue 25). The input drives a Report
// with any values a run can produce (non-finite losses, a loss or FP8 scale underflowed to 0,
// denormals, long per-step series that are written in buckets, any status, repetitions, seeds,
// convolution choices); it is written as `run --json` writes it, then read back as `compare` and
// `report` read it, and every formatter runs on what was read. Any exception is a finding: the
// reader refusing the writer's own output included.
#include <fuzzer/FuzzedDataProvider.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "app/compare.h"
#include "app/console_table.h"
#include "app/html_report.h"
#include "app/output_file.h"
#include "app/report_writers.h"
#include "models/input_file.h"
#include "train/results.h"

namespace {

using namespace mpbench;

// Any float: finite of either sign, 0, denormal, huge, inf or NaN.
float any_float(FuzzedDataProvider& in) {
  switch (in.ConsumeIntegralInRange(0, 7)) {
    case 0:
      return NAN;
    case 1:
      return INFINITY;
    case 2:
      return 0.0f;
    case 3:
      return FLT_TRUE_MIN * float(in.ConsumeIntegralInRange(1, 100));
    case 4:
      return FLT_MAX;
    default:
      return in.ConsumeFloatingPointInRange(-1e6f, 1e6f);
  }
}
// A cross-entropy loss: >= 0, or inf / NaN for a diverged step.
float loss_value(FuzzedDataProvider& in) {
  return std::fabs(any_float(in));
}
// A non-negative float: a scale, an amax, a norm (inf for an overflowed one, never NaN).
float non_negative(FuzzedDataProvider& in, bool allow_inf) {
  const float v = std::fabs(any_float(in));
  return std::isnan(v) || (!allow_inf && std::isinf(v)) ? 1.0f : v;
}

// Run `index` of `count`: several runs are repetitions of one another or of other modes, as `run
// --repeat` writes them (never two runs `compare` could not tell apart).
RunResult make_run(FuzzedDataProvider& in, int index, int count) {
  RunResult r;
  r.model = in.PickValueInArray({"tiny_mlp", "bert_base", "m"});
  r.family = in.PickValueInArray({"mlp", "transformer", "resnet_bottleneck"});
  r.precision = in.PickValueInArray({"fp32", "tf32", "amp_fp16", "amp_bf16", "amp_fp8"});
  r.device = in.PickValueInArray({"cpu", "cuda"});
  r.status = in.PickValueInArray({RunStatus::Ok, RunStatus::Oom, RunStatus::Diverged,
                                  RunStatus::Failed, RunStatus::Unsupported});
  if (r.status != RunStatus::Ok) r.status_detail = in.ConsumeRandomLengthString(64);
  r.cuda_graphs = in.ConsumeBool();
  if (count == 1 && in.ConsumeBool()) r.seed = in.ConsumeIntegralInRange<uint64_t>(1, 64);
  if (count > 1 || in.ConsumeBool()) r.repetition = index + 1;
  r.batch_size = in.ConsumeIntegralInRange<int64_t>(1, 1 << 20);
  r.train_samples = in.ConsumeIntegralInRange<int64_t>(1, 1 << 26);
  r.warmup_steps = in.ConsumeIntegralInRange<int64_t>(0, 100);
  // As the trainer writes (and the reader holds it to): a run that trained has an epoch at least,
  // each of a time above 0.
  const bool trained = r.status == RunStatus::Ok;
  const int epochs = in.ConsumeIntegralInRange(trained ? 1 : 0, 12);
  std::vector<double> times;
  for (int e = 0; e < epochs; ++e) {
    EpochResult er;
    er.time_ms = in.ConsumeFloatingPointInRange(trained ? 1e-6 : 0.0, 1e9);
    er.eval_time_ms = in.ConsumeFloatingPointInRange(0.0, 1e9);
    er.train_loss = loss_value(in);
    er.eval_loss = loss_value(in);
    er.eval_accuracy = in.ConsumeProbability<double>();
    er.steps = in.ConsumeIntegralInRange<int64_t>(0, 1 << 20);
    r.epochs.push_back(er);
    times.push_back(er.time_ms);
  }
  r.epoch_time_ms = compute_time_stats(times);
  r.samples_per_second = in.ConsumeFloatingPointInRange(0.0, 1e12);
  r.flops_per_step = in.ConsumeFloatingPointInRange(0.0, 1e18);
  r.tflops = in.ConsumeFloatingPointInRange(0.0, 1e4);
  r.percent_of_peak = in.ConsumeFloatingPointInRange(0.0, 100.0);
  r.memory.tracked_peak = in.ConsumeIntegral<uint32_t>();
  r.memory.training_peak = in.ConsumeIntegral<uint32_t>();
  r.memory.has_device = in.ConsumeBool();
  r.final_accuracy = in.ConsumeProbability<double>();
  r.final_loss = loss_value(in);
  r.loss_scaling = in.ConsumeBool();
  r.final_loss_scale = non_negative(in, false);
  // Sometimes more steps than a file holds one by one (kMaxWrittenSteps).
  const int64_t steps = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(0, 64)
                                         : in.ConsumeIntegralInRange<int64_t>(0, 20000);
  const float loss = loss_value(in), scale = non_negative(in, false);
  for (int64_t i = 0; i < steps; ++i) {
    // One drawn value per series, perturbed per step: a long series costs no input bytes.
    const bool skip = i % 7 == 3 && in.ConsumeBool();
    r.steps.push_back(StepRecord{loss * float(1 + i % 5), skip ? INFINITY : float(i % 3),
                                 i % 11 == 0 ? scale / 2 : scale, skip,
                                 i < r.warmup_steps ? NAN : float(i % 13)});
    r.skipped_steps += skip ? 1 : 0;
  }
  const int fp8 = steps > 0 && r.precision == "amp_fp8" ? in.ConsumeIntegralInRange(0, 6) : 0;
  for (int t = 0; t < fp8; ++t) {
    Fp8TensorSeries s{
        "fc" + std::to_string(t) + ".x", in.PickValueInArray({"fp8_e4m3", "fp8_e5m2"}), {}, {}};
    const float amax = non_negative(in, true), sc = non_negative(in, false);
    for (int64_t i = 0; i < steps; ++i) {
      s.amax.push_back(i % 3 == 0 ? amax : 0.5f * float(i % 4));
      s.scale.push_back(i % 5 == 0 ? sc : 1.0f);
    }
    s.clipped_steps = fp8_clipped_steps(s, in.ConsumeBool());
    r.fp8_scaling.push_back(std::move(s));
  }
  if (r.device == "cuda" && in.ConsumeBool()) {
    ConvAlgorithm a;
    a.op = in.PickValueInArray({"forward", "backward_data", "backward_filter"});
    a.n = a.h = a.w = a.c = a.k = a.r = a.s = a.stride = in.ConsumeIntegralInRange<int64_t>(1, 512);
    a.dtype = in.PickValueInArray({"fp32", "fp16", "bf16"});
    a.algo = in.ConsumeIntegralInRange<int64_t>(0, 8);
    a.algo_name = "algo";
    a.math = in.PickValueInArray({"default", "tensor_op", "tensor_op_allow_conversion", "fma"});
    a.workspace_bytes = in.ConsumeIntegral<uint32_t>();
    a.workspace_limited = in.ConsumeBool();
    r.conv_algorithms.push_back(a);
  }
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Report rep;
  rep.tool = {{"name", "mpbench"}, {"version", "fuzz"}, {"git", "none"}};
  rep.env = {{"device", "cpu"}};
  const int runs = in.ConsumeIntegralInRange(1, 4);
  for (int i = 0; i < runs; ++i) rep.runs.push_back(make_run(in, i, runs));

  // Written as `run --json` writes it, read as `compare` and `report` read it: no exception.
  const std::string text = json_text(to_json(rep));
  const Report back = report_from_json(parse_json_text(text, "roundtrip.json"));
  // What was read writes back to the same document (the buckets stay buckets).
  if (to_json(back) != to_json(report_from_json(to_json(back)))) __builtin_trap();

  (void)format_console(back);
  (void)format_csv(back);
  (void)format_markdown(back);
  const Comparison c = compare_reports(back, back, CompareOptions{});
  (void)format_compare_console(c);
  (void)format_html({ReportInput{"roundtrip.json", back}}, {});
  return 0;
}
