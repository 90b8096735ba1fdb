// The op profiler (`mpbench profile`): it must not change what it measures (a profiled run
// trains bit-identically), it must see every op of a step in the right layer's scope, and the
// FLOPs it counts must agree with the model's own count.
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "models/dataset.h"
#include "models/model.h"
#include "models/spec.h"
#include "test_util.h"
#include "train/op_profile.h"
#include "train/trainer.h"

using namespace mpbench;

namespace {

Spec config(const std::string& name) {
  Spec s = load_spec(test::source_dir() + "/configs/" + name + ".json");
  s.train.epochs = 1;
  s.train.warmup_steps = 2;
  s.data.train_samples = 4 * s.train.batch_size;
  s.data.eval_samples = s.train.batch_size;
  return s;
}

// Every step after the warm-up (config() makes four), through what `mpbench profile` uses.
ProfiledRun profile(const Spec& spec, Precision p) {
  auto cpu = make_reference_backend();
  Dataset data = make_dataset(spec);
  return profile_training(spec, data, p, 4, *cpu);
}

}  // namespace

TEST(OpProfiler, TrainsExactlyAsWithoutIt) {
  for (const char* name : {"tiny_mlp", "tiny_resnet", "tiny_transformer"}) {
    Spec spec = config(name);
    auto cpu = make_reference_backend();
    Dataset data = make_dataset(spec);
    RunResult plain = train_and_measure(spec, data, Precision::AMP_FP16, *cpu);
    ProfiledRun prof = profile(spec, Precision::AMP_FP16);
    ASSERT_EQ(plain.status, RunStatus::Ok) << plain.status_detail;
    ASSERT_EQ(prof.run.status, RunStatus::Ok) << prof.run.status_detail;
    ASSERT_EQ(plain.steps.size(), prof.run.steps.size()) << name;
    for (size_t i = 0; i < plain.steps.size(); ++i) {
      EXPECT_EQ(plain.steps[i].loss, prof.run.steps[i].loss) << name << " step " << i;
      EXPECT_EQ(plain.steps[i].grad_norm, prof.run.steps[i].grad_norm) << name << " step " << i;
    }
    EXPECT_EQ(plain.final_accuracy, prof.run.final_accuracy) << name;
    EXPECT_EQ(plain.memory.tracked_peak, prof.run.memory.tracked_peak) << name;
  }
}

TEST(OpProfiler, EveryLayerInItsScopeAndOnlyProfiledSteps) {
  for (const char* name : {"tiny_mlp", "tiny_resnet", "tiny_transformer"}) {
    Spec spec = config(name);
    ProfiledRun prof = profile(spec, Precision::AMP_BF16);
    ASSERT_EQ(prof.run.status, RunStatus::Ok) << prof.run.status_detail;
    EXPECT_EQ(prof.steps, 4) << name;
    // The step times are the profiled steps', the ones after the warm-up.
    ASSERT_EQ(prof.step_times_ms.size(), 4u) << name;
    for (size_t i = 0; i < 4; ++i)
      EXPECT_EQ(prof.step_times_ms[i],
                prof.run.steps[static_cast<size_t>(spec.train.warmup_steps) + i].time_ms)
          << name;
    std::set<std::string> scopes;
    std::map<std::string, int64_t> calls_by_op;
    for (const auto& o : prof.ops) {
      scopes.insert(o.scope);
      calls_by_op[o.op] += o.calls;
      EXPECT_GT(o.calls, 0);
      EXPECT_GE(o.ms, 0.0);
      // Its time in each profiled step, which add up to its total.
      ASSERT_EQ(o.step_ms.size(), 4u) << name << ": " << o.scope << " " << o.op;
      double sum = 0;
      for (double t : o.step_ms) sum += t;
      EXPECT_NEAR(sum, o.ms, 1e-9 * (1 + o.ms)) << name << ": " << o.scope << " " << o.op;
    }
    const std::vector<std::string> layers = Model(spec, Precision::AMP_BF16).layer_names();
    for (const auto& l : layers) {
      EXPECT_TRUE(scopes.count(l + " fwd")) << name << ": " << l;
      EXPECT_TRUE(scopes.count(l + " bwd")) << name << ": " << l;
    }
    EXPECT_TRUE(scopes.count("step")) << name;
    EXPECT_EQ(scopes.size(), 2 * layers.size() + 1) << name;
    // Once per profiled step: neither the warm-up nor the evaluation's forward passes count.
    EXPECT_EQ(calls_by_op["softmax_xent"], 4) << name;
    EXPECT_EQ(calls_by_op["adamw_step"] + calls_by_op["sgd_step"], 4) << name;
    EXPECT_EQ(calls_by_op["unscale_check_norm"], 4) << name;
    // The loss runs once a step: it has a time in each of the four.
    for (const auto& o : prof.ops)
      if (o.op == "softmax_xent")
        for (double t : o.step_ms) EXPECT_GT(t, 0.0) << name;
  }
}

// The GEMM FLOPs the profiler counts are the model's: per Linear 2*in*out per sample forward, as
// `inspect` counts, and backward a dW GEMM per layer and a dX GEMM for every layer but the first.
// Fewer steps than the run has: exactly those are profiled, the first after the warm-up.
TEST(OpProfiler, ProfilesTheStepsAskedForAndNoMore) {
  Spec spec = config("tiny_mlp");
  auto cpu = make_reference_backend();
  Dataset data = make_dataset(spec);
  const ProfiledRun prof = profile_training(spec, data, Precision::FP32, 2, *cpu);
  ASSERT_EQ(prof.run.status, RunStatus::Ok) << prof.run.status_detail;
  EXPECT_EQ(prof.steps, 2);
  ASSERT_EQ(prof.step_times_ms.size(), 2u);
  EXPECT_EQ(prof.step_times_ms[1],
            prof.run.steps[static_cast<size_t>(spec.train.warmup_steps) + 1].time_ms);
  for (const auto& o : prof.ops) EXPECT_LE(o.step_ms.size(), 2u) << o.op;
}

TEST(OpProfiler, GemmFlopsMatchTheModelsCount) {
  Spec spec = config("tiny_mlp");
  ProfiledRun prof = profile(spec, Precision::FP32);
  ASSERT_EQ(prof.run.status, RunStatus::Ok) << prof.run.status_detail;
  double fwd = 0, all = 0;
  for (const auto& o : prof.ops) {
    if (o.op != "gemm") continue;
    all += o.flops;
    if (o.scope.size() > 4 && o.scope.compare(o.scope.size() - 4, 4, " fwd") == 0) fwd += o.flops;
  }
  const auto infos = Model(spec, Precision::FP32).layer_infos();
  const double batch = static_cast<double>(spec.train.batch_size);
  double model_fwd = 0;
  for (const auto& li : infos) model_fwd += li.forward_flops * batch;
  const double first = infos[0].forward_flops * batch;
  EXPECT_DOUBLE_EQ(fwd / prof.steps, model_fwd);
  EXPECT_DOUBLE_EQ(all / prof.steps, 3 * model_fwd - first);
}

// What a run counts for a training step (its TFLOP/s and % of peak) is what the step executes:
// every GEMM and convolution the profiler times, the first layer's input gradient left out (it
// was counted: mnist_mlp's fp32 run read 113% of the native CPU's measured peak). Configs
// without causal attention, whose masked scores the profiler counts and runs do not.
TEST(OpProfiler, ARunsTrainingFlopsAreWhatTheStepExecutes) {
  for (const char* name : {"tiny_mlp", "tiny_resnet", "tiny_resnet_stem"}) {
    SCOPED_TRACE(name);
    const Spec spec = config(name);
    const ProfiledRun prof = profile(spec, Precision::FP32);
    ASSERT_EQ(prof.run.status, RunStatus::Ok) << prof.run.status_detail;
    double executed = 0;
    for (const auto& o : prof.ops) executed += o.flops;
    executed /= static_cast<double>(prof.steps);
    EXPECT_NEAR(prof.run.flops_per_step, executed, 1e-9 * executed);
    const double three_forward =
        3 * Model(spec, Precision::FP32).forward_flops_per_sample() * spec.train.batch_size;
    EXPECT_LT(prof.run.flops_per_step, three_forward);  // the first layer's input gradient
  }
}

// The least bytes of the memory-bound ops: AdamW in an AMP mode reads and writes the fp32
// master, m and v, reads the fp32 gradients and writes the 16-bit copy (30 bytes a parameter);
// casts move their source and destination; GEMMs count FLOPs, not bytes.
TEST(OpProfiler, BytesOfTheMemoryBoundOps) {
  Spec spec = config("tiny_mlp");
  ProfiledRun prof = profile(spec, Precision::AMP_BF16);
  ASSERT_EQ(prof.run.status, RunStatus::Ok) << prof.run.status_detail;
  int64_t params = 0;
  for (const auto& li : Model(spec, Precision::AMP_BF16).layer_infos()) params += li.params;
  bool saw_adamw = false;
  for (const auto& o : prof.ops) {
    if (o.op == "adamw_step") {
      saw_adamw = true;
      EXPECT_DOUBLE_EQ(o.bytes, 30.0 * static_cast<double>(params) * o.calls);
    }
    if (o.op == "gemm") EXPECT_EQ(o.bytes, 0.0) << o.detail;
  }
  EXPECT_TRUE(saw_adamw);

  // Called directly: a cast of 1000 elements fp32 -> bf16 moves 4000 + 2000 bytes, an add of
  // bf16 + fp32 into fp32 2000 + 4000 + 4000; nothing is counted while disabled.
  auto cpu = make_reference_backend();
  OpProfiler direct(*cpu);
  std::vector<float> f32(1000, 1.0f), out(1000);
  std::vector<uint16_t> b16(1000);
  Tensor a{f32.data(), Shape{1000}, DType::F32, Device::CPU};
  Tensor b{b16.data(), Shape{1000}, DType::BF16, Device::CPU};
  Tensor c{out.data(), Shape{1000}, DType::F32, Device::CPU};
  cpu->cast(a, b);  // disabled
  direct.set_enabled(true);
  cpu->cast(a, b);
  cpu->add(b, a, c);
  const auto ops = direct.collect();
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].op, "cast");
  EXPECT_EQ(ops[0].calls, 1);
  EXPECT_EQ(ops[0].bytes, 6000.0);
  EXPECT_EQ(ops[1].op, "add");
  EXPECT_EQ(ops[1].bytes, 10000.0);
  EXPECT_EQ(out[0], 2.0f);  // the ops ran
}

// Against an H200's datasheet (989.4 TFLOP/s bf16, 4800 GB/s): a GEMM's FLOPs over its time
// against the mode's peak, a memory-bound op's bytes against the bandwidth; no ceilings for the
// CPU or a card not in the table.
TEST(OpProfiler, PercentOfTheCardsCeilings) {
  DeviceInfo h200;
  h200.kind = "cuda";
  h200.name = "NVIDIA H200";
  const auto c = ceilings_for(h200, Precision::AMP_BF16);
  ASSERT_TRUE(c.has_value());
  EXPECT_DOUBLE_EQ(c->peak_tflops, 989.4);
  EXPECT_DOUBLE_EQ(c->memory_gbps, 4800);
  OpTotal gemm{"layer1 fwd", "gemm", "", 1, 1.0, 494.7e9, 0};           // 494.7 TFLOP/s
  OpTotal ln{"layer1 fwd", "layernorm_forward", "", 1, 0.5, 0, 1.2e9};  // 2400 GB/s
  OpTotal none{"step", "count_step", "", 1, 0.01, 0, 0};
  EXPECT_NEAR(*percent_of_ceiling(gemm, *c), 50.0, 1e-9);
  EXPECT_NEAR(*percent_of_ceiling(ln, *c), 50.0, 1e-9);
  EXPECT_FALSE(percent_of_ceiling(none, *c).has_value());
  // The all-reduce's bytes cross the interconnect, which neither ceiling describes.
  OpTotal all_reduce{"step", "all_reduce", "", 1, 0.5, 0, 1.2e9};
  EXPECT_FALSE(percent_of_ceiling(all_reduce, *c).has_value());
  DeviceInfo cpu;
  cpu.kind = "cpu";
  cpu.name = "Intel(R) Xeon(R) Processor";
  EXPECT_FALSE(ceilings_for(cpu, Precision::FP32).has_value());
  h200.name = "Some Future GPU";
  EXPECT_FALSE(ceilings_for(h200, Precision::FP32).has_value());
}

// Two rounds of a mode pooled: their steps one after another, each op's totals summed and its
// per-step times joined (zeros in a round it did not run in); the step median over all steps. A
// round that did not train is the pool.
TEST(OpProfiler, PoolRoundsJoinsTheSteps) {
  auto total = [](const char* op, std::vector<double> step_ms) {
    OpTotal o;
    o.scope = "step";
    o.op = op;
    o.calls = static_cast<int64_t>(step_ms.size());
    o.flops = 10.0 * o.calls;
    for (double t : step_ms) o.ms += t;
    o.step_ms = std::move(step_ms);
    return o;
  };
  ProfiledRun r1, r2;
  r1.run.status = r2.run.status = RunStatus::Ok;
  r1.steps = 2;
  r1.step_times_ms = {10, 12};
  r1.ops = {total("gemm", {6, 7}), total("cast", {1, 1})};
  r2.steps = 3;
  r2.step_times_ms = {20, 30, 40};
  r2.ops = {total("gemm", {8, 9, 10})};
  const ProfiledRun p = pool_rounds({r1, r2});
  EXPECT_EQ(p.steps, 5);
  EXPECT_EQ(p.step_times_ms, (std::vector<double>{10, 12, 20, 30, 40}));
  EXPECT_DOUBLE_EQ(p.step_ms, 20.0);
  EXPECT_DOUBLE_EQ(p.step_mean_ms, 112.0 / 5);
  ASSERT_EQ(p.ops.size(), 2u);
  EXPECT_EQ(p.ops[0].op, "gemm");
  EXPECT_EQ(p.ops[0].calls, 5);
  EXPECT_DOUBLE_EQ(p.ops[0].ms, 40.0);
  EXPECT_DOUBLE_EQ(p.ops[0].flops, 50.0);
  EXPECT_EQ(p.ops[0].step_ms, (std::vector<double>{6, 7, 8, 9, 10}));
  EXPECT_EQ(p.ops[1].step_ms, (std::vector<double>{1, 1, 0, 0, 0}));
  // A cast that runs only in the second round: zeros for the first round's steps.
  r2.ops.push_back(total("fill", {2, 2, 2}));
  EXPECT_EQ(pool_rounds({r1, r2}).ops[2].step_ms, (std::vector<double>{0, 0, 2, 2, 2}));
  // A profile made without per-step times spreads its total; the loss scaler's skips add up.
  r2.ops[1].step_ms.clear();
  r1.run.skipped_steps = 1;
  r2.run.skipped_steps = 2;
  const ProfiledRun q = pool_rounds({r1, r2});
  EXPECT_EQ(q.ops[2].step_ms, (std::vector<double>{0, 0, 2, 2, 2}));
  EXPECT_EQ(q.run.skipped_steps, 3);
  r2.run.status = RunStatus::Oom;
  r2.run.status_detail = "over the limit";
  EXPECT_EQ(pool_rounds({r1, r2}).run.status_detail, "over the limit");
}

// In an encoder layer's backward, fc2's dX GEMM also applies fc1's GELU backward and writes its
// bias gradient (Linear's fused protocol): bias_act_backward runs for the other Linears' biases
// alone (fc2, proj and qkv), once a step each, in every layer.
TEST(OpProfiler, AnEncoderLayersFc1BackwardRidesOnFc2sGemm) {
  const Spec spec = config("tiny_transformer");
  const ProfiledRun prof = profile(spec, Precision::FP32);
  ASSERT_EQ(prof.run.status, RunStatus::Ok) << prof.run.status_detail;
  std::map<std::string, int64_t> calls;
  for (const auto& o : prof.ops)
    if (o.op == "bias_act_backward") calls[o.scope] += o.calls;
  EXPECT_EQ(calls["layer1 bwd"], 3 * prof.steps);
  EXPECT_EQ(calls["layer2 bwd"], 3 * prof.steps);
}

// An op's times over a run's steps are its per-step times padded with zeros, never cut short (a
// total recorded over more steps keeps all of its time); one recorded without them is spread
// evenly, over one step at least.
TEST(OpProfiler, PerStepTimesArePaddedNeverCut) {
  OpTotal o;
  o.ms = 6;
  o.step_ms = {1, 2, 3};
  EXPECT_EQ(per_step_ms(o, 5), (std::vector<double>{1, 2, 3, 0, 0}));
  EXPECT_EQ(per_step_ms(o, 2), (std::vector<double>{1, 2, 3}));
  o.step_ms.clear();
  EXPECT_EQ(per_step_ms(o, 3), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(per_step_ms(o, 0), (std::vector<double>{6}));
}

TEST(OpProfiler, DisabledRecordsNothing) {
  auto cpu = make_reference_backend();
  OpProfiler prof(*cpu);
  Spec spec = config("tiny_mlp");
  Dataset data = make_dataset(spec);
  TrainOptions opts;
  opts.layer_observer = &prof;
  RunResult r = train_and_measure(spec, data, Precision::FP32, *cpu, opts);
  ASSERT_EQ(r.status, RunStatus::Ok) << r.status_detail;
  EXPECT_TRUE(prof.collect().empty());
}

TEST(OpProfiler, GemmDetailNamesShapeDtypesAndEpilogue) {
  auto cpu = make_reference_backend();
  std::vector<uint16_t> a_host(6 * 4), c_host(6 * 5);
  Tensor a{a_host.data(), Shape{6, 4}, DType::BF16, Device::CPU};
  Tensor c{c_host.data(), Shape{6, 5}, DType::BF16, Device::CPU};
  Tensor bias{nullptr, Shape{5}, DType::F32, Device::CPU};
  GemmDesc d;
  d.bias = &bias;
  d.act = Activation::Gelu;
  EXPECT_EQ(gemm_detail(d, a, c), "6x5x4 bf16 +bias +gelu");
  EXPECT_DOUBLE_EQ(gemm_flops(d, a, c), 2.0 * 6 * 5 * 4);
  GemmDesc t;
  t.trans_a = true;  // a stored (K, M): K = 6 rows of a, M = c's rows
  Tensor at{a_host.data(), Shape{4, 6}, DType::BF16, Device::CPU};
  Tensor c32{c_host.data(), Shape{6, 5}, DType::F32, Device::CPU};
  EXPECT_EQ(gemm_detail(t, at, c32), "6x5x4 bf16->fp32");
}
