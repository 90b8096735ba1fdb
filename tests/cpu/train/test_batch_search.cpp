// The largest-batch search alone (search_max_batch, train/max_batch.h) against models of memory
// that no backend gives on demand: a prediction that overstates, one that understates by a
// workspace growing with the batch, refusals that say what they needed and ones that do not, a
// spec that refuses large batches. Whatever the model, the answer is the largest multiple of K
// that fits, each batch is probed once, and guided probes stay few.
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "train/max_batch.h"

using namespace mpbench;

namespace {

// Training at batch b takes per_sample * b + fixed + extra_per_sample * b + extra_fixed (the
// extra: what the prediction leaves out, a library's workspace); the prediction says
// predicted_per_sample * b + fixed.
struct MemoryModel {
  size_t per_sample = 1000, predicted_per_sample = 1000, fixed = 10000;
  size_t extra_per_sample = 0, extra_fixed = 0;
  int64_t refuse_above = 0;  // the spec's rules refuse larger batches; 0: none
  int64_t refuse_below = 0;  // and smaller ones (batch statistics over a 1x1 map); 0: none
  // How much of what an oom probe needed beyond the limit its refusal says (0: only that it
  // passed the limit); a negative value: nothing (a device's refusal, not the allocator's).
  double told = 1.0;
  size_t limit = 1 << 20;

  size_t real(int64_t b) const {
    const auto n = static_cast<size_t>(b);
    return (per_sample + extra_per_sample) * n + fixed + extra_fixed;
  }
  size_t predicted(int64_t b) const {
    return predicted_per_sample * static_cast<size_t>(b) + fixed;
  }
  bool refused(int64_t b) const {
    return (refuse_above > 0 && b > refuse_above) || b < refuse_below;
  }

  // The largest multiple of k that trains under the limit, by brute force.
  int64_t answer(int64_t k) const {
    int64_t best = 0;
    for (int64_t b = k; b <= kMaxBatchSize; b += k) {
      if (b < refuse_below) continue;
      if (refused(b) || real(b) > limit) break;
      best = b;
    }
    return best;
  }

  BatchOracle oracle() const {
    BatchOracle o;
    o.predicted_peak = [this](int64_t b) -> std::optional<size_t> {
      if (refused(b)) return std::nullopt;
      return predicted(b);
    };
    o.probe = [this](int64_t b) {
      BatchProbe p;
      p.batch = b;
      if (refused(b)) {
        p.status = RunStatus::Failed;
        p.refused = true;
        p.detail = "refused";
        return p;
      }
      p.run.has_predicted_memory = true;
      p.run.predicted_memory.training_peak = predicted(b);
      const size_t need = real(b);
      if (need <= limit) {
        p.run.memory.training_peak = need;
        p.run.status = RunStatus::Ok;
      } else {
        p.run.status = RunStatus::Oom;
        // The allocator refuses the first request past the limit: in use plus the request, more
        // than the limit and at most what the whole step would have taken.
        if (told >= 0)
          p.run.oom_needed_bytes =
              limit + 1 + static_cast<size_t>(told * static_cast<double>(need - limit - 1));
      }
      p.status = p.run.status;
      return p;
    };
    return o;
  }
};

MaxBatchResult search(const MemoryModel& m, int64_t k = 1, bool from_prediction = true) {
  MaxBatchOptions opts;
  opts.memory_limit = m.limit;
  opts.multiple = k;
  opts.from_prediction = from_prediction;
  return search_max_batch(m.oracle(), opts);
}

// Every probe a multiple of K, none twice, and the answer the brute force's.
void expect_sound(const MemoryModel& m, int64_t k, const MaxBatchResult& r,
                  const std::string& what) {
  EXPECT_EQ(r.max_batch, m.answer(k)) << what;
  EXPECT_EQ(r.at_limit, r.max_batch == kMaxBatchSize / k * k) << what;
  EXPECT_FALSE(r.stopped) << what;
  std::set<int64_t> seen;
  for (const BatchProbe& p : r.probes) {
    EXPECT_EQ(p.batch % k, 0) << what << ": probe " << p.batch;
    EXPECT_TRUE(seen.insert(p.batch).second) << what << ": " << p.batch << " probed twice";
  }
  if (r.max_batch > 0) {
    ASSERT_NE(r.best(), nullptr) << what;
    EXPECT_LE(r.best()->run.memory.training_peak, m.limit) << what;
  }
  // What bounded it (maxbatch's "bound by"): the next multiple of K, whichever probe failed
  // first (from a guess far above, the first to fail is not the bound).
  if (r.at_limit) return;
  ASSERT_NE(r.bound(), nullptr) << what;
  if (r.max_batch > 0) EXPECT_EQ(r.bound()->batch, r.max_batch + k) << what;
  for (const BatchProbe& p : r.probes)
    if (p.status != RunStatus::Ok) EXPECT_GE(p.batch, r.bound()->batch) << what;
}

std::vector<int64_t> batches(const MaxBatchResult& r) {
  std::vector<int64_t> out;
  for (const BatchProbe& p : r.probes) out.push_back(p.batch);
  return out;
}

}  // namespace

// An exact prediction is confirmed in two probes: its batch trains, the next multiple does not.
TEST(BatchSearch, AnExactPredictionTakesTwoProbes) {
  const MemoryModel m;  // (2^20 - 10000) / 1000: 1038
  const MaxBatchResult r = search(m, 2);
  expect_sound(m, 2, r, "exact");
  EXPECT_EQ(r.predicted, 1038);
  EXPECT_EQ(batches(r), (std::vector<int64_t>{1038, 1040}));
}

// A workspace the prediction leaves out: the first probe's excess guides the next guess.
TEST(BatchSearch, AWorkspaceThePredictionLeavesOutIsLearnedFromTheProbes) {
  MemoryModel m;
  m.extra_fixed = 200000;  // answer (2^20 - 210000) / 1000: 838
  const MaxBatchResult r = search(m);
  expect_sound(m, 1, r, "fixed workspace");
  EXPECT_EQ(r.predicted, 1038);
  EXPECT_LE(r.probes.size(), 4u);
  EXPECT_LT(r.probes.size(), search(m, 1, false).probes.size());
}

// A prediction that overstates: its batch and the next train, so the search hands over to the
// doubling from there (steps of K would take ~160 probes here), then bisects.
TEST(BatchSearch, APredictionThatOverstatesHandsOverToTheDoubling) {
  MemoryModel m;
  m.predicted_per_sample = 1200;  // predicted 865; real answer 1038
  const MaxBatchResult r = search(m);
  expect_sound(m, 1, r, "overstated");
  EXPECT_EQ(r.predicted, 865);
  const std::vector<int64_t> b = batches(r);
  ASSERT_GE(b.size(), 3u);
  EXPECT_EQ(b[0], 865);
  EXPECT_EQ(b[1], 866);                 // confirming: the next multiple past a batch that trained
  EXPECT_EQ(b[2], 1732);                // it trained too: doubling
  EXPECT_LE(r.probes.size(), 3 + 10u);  // then bisecting 866..1732
}

// A refusal that says nothing of what it needed (a device's, not the allocator's) leaves the
// guesses to the step-down and the bisection, and still finds the answer.
TEST(BatchSearch, ARefusalThatSaysNothingStillEndsAtTheAnswer) {
  MemoryModel m;
  m.extra_per_sample = 300;
  m.told = -1;
  const MaxBatchResult r = search(m, 4);
  expect_sound(m, 4, r, "silent oom");
  EXPECT_EQ(r.probes.front().status, RunStatus::Oom);
  EXPECT_EQ(r.probes.front().run.oom_needed_bytes, 0u);
}

// A refusal without a byte figure far above the answer (the host's memory, not the budget,
// binding: the prediction says 2^20 fits, 1/60 of it does). The steps down from it count among
// the 8 guesses, then the search bisects: it stepped down 20 times from 2^20 before, 41 probes.
TEST(BatchSearch, ARefusalThatSaysNothingFarAboveTheAnswerIsBisectedAfterEightGuesses) {
  for (const int64_t k : {1, 8}) {
    MemoryModel m;
    m.predicted_per_sample = 1;
    m.per_sample = 60;
    m.fixed = 1000;
    m.limit = m.fixed + static_cast<size_t>(kMaxBatchSize);
    m.told = -1;
    const MaxBatchResult r = search(m, k);
    const std::string what = fmt::format("k {}", k);
    expect_sound(m, k, r, what);
    EXPECT_EQ(r.predicted, kMaxBatchSize / k * k) << what;
    // 8 guesses, the smallest batch, then bisecting between it and the smallest refused.
    const double most = 8 + 1 + std::ceil(std::log2(static_cast<double>(kMaxBatchSize / k)));
    EXPECT_LE(static_cast<double>(r.probes.size()), most) << what;
    for (size_t i = 0; i < std::min<size_t>(8, r.probes.size()); ++i)
      EXPECT_EQ(r.probes[i].status, RunStatus::Oom) << what << ": guess " << i;
    ASSERT_GT(r.probes.size(), 8u) << what;
    EXPECT_EQ(r.probes[8].batch, k) << what << ": bisection from the smallest batch";
  }
}

// Without a limit nothing is predicted: the plain doubling until the spec refuses.
TEST(BatchSearch, WithoutALimitTheSpecsRulesBoundTheSearch) {
  MemoryModel m;
  m.limit = SIZE_MAX;
  m.refuse_above = 100;
  MaxBatchOptions opts;
  opts.multiple = 3;
  const MaxBatchResult r = search_max_batch(m.oracle(), opts);
  EXPECT_EQ(r.predicted, 0);
  EXPECT_EQ(r.max_batch, 99);
  EXPECT_FALSE(r.at_limit);
}

// A spec whose rules refuse the smallest batches (a ResNet whose last feature map is 1x1 takes
// no batch of 1): the search starts at the smallest batch they take, found on the prediction,
// and no batch under it is probed. Before, it probed K, was refused and answered "none fits".
// The prediction fits the smallest batch alone, and it does not train (what the prediction
// leaves out is past the limit by itself): none fits, after that one probe, not a second of it.
TEST(BatchSearch, WhenTheSmallestBatchFailsItIsProbedOnce) {
  MemoryModel m;
  m.predicted_per_sample = 600000;  // predicted: batch 1 fits 1 MiB, 2 does not
  m.extra_fixed = m.limit;          // real: none fits
  const MaxBatchResult r = search(m);
  expect_sound(m, 1, r, "nothing fits");
  EXPECT_EQ(r.max_batch, 0);
  EXPECT_EQ(batches(r), std::vector<int64_t>{1});
}

TEST(BatchSearch, TheSearchStartsAtTheSmallestBatchTheSpecTakes) {
  for (const bool with_limit : {true, false}) {
    MemoryModel m;
    m.refuse_below = 13;
    if (!with_limit) m.refuse_above = 200;
    m.limit = with_limit ? m.limit : SIZE_MAX;
    for (const int64_t k : {1, 4, 64}) {
      const std::string what = fmt::format("k {} {}", k, with_limit ? "limit" : "no limit");
      MaxBatchOptions opts;
      opts.memory_limit = with_limit ? m.limit : 0;
      opts.multiple = k;
      const MaxBatchResult r = search_max_batch(m.oracle(), opts);
      EXPECT_EQ(r.max_batch, m.answer(k)) << what;
      EXPECT_GT(r.max_batch, 0) << what;
      for (const BatchProbe& p : r.probes) EXPECT_GE(p.batch, m.refuse_below) << what;
    }
  }
  // Not one batch the rules take, to the largest a spec takes: nothing probed, none fits.
  MemoryModel m;
  m.refuse_below = kMaxBatchSize + 1;
  const MaxBatchResult r = search(m, 8);
  EXPECT_EQ(r.max_batch, 0);
  EXPECT_TRUE(r.probes.empty());
}

// amp_fp8's multiple (K's lcm with 16) can pass the largest batch a spec takes: nothing is
// probed, and the result says that limit bound it, not memory (it said neither, max batch 0).
TEST(BatchSearch, AMultiplePastTheLargestBatchASpecTakesIsThatBound) {
  const MemoryModel m;
  const MaxBatchResult r = search(m, kMaxBatchSize + 1);
  EXPECT_EQ(r.max_batch, 0);
  EXPECT_TRUE(r.probes.empty());
  EXPECT_TRUE(r.at_limit);
  EXPECT_FALSE(r.stopped);
}

// Many models at random (fixed seed): the prediction over- or understating by up to half, a
// workspace fixed or growing with the batch, refusals telling all, part or nothing, specs that
// refuse large batches, limits from a few samples to past the largest batch. Always the brute
// force's answer; the guided search never takes many more probes than the plain one, and fewer
// overall.
TEST(BatchSearch, RandomModelsOfMemoryAlwaysGiveTheLargestBatchThatFits) {
  std::mt19937_64 rng(20261204);
  auto pick = [&](uint64_t lo, uint64_t hi) { return lo + rng() % (hi - lo + 1); };
  size_t guided = 0, plain = 0;
  for (int i = 0; i < 400; ++i) {
    MemoryModel m;
    const int64_t k = std::vector<int64_t>{1, 2, 3, 8, 64}[pick(0, 4)];
    m.per_sample = pick(1, 4096);
    m.predicted_per_sample = std::max<size_t>(1, m.per_sample * pick(50, 150) / 100);
    m.fixed = pick(0, 1 << 20);
    m.extra_fixed = pick(0, 3) == 0 ? 0 : pick(0, 1 << 18);
    m.extra_per_sample = pick(0, 2) == 0 ? m.per_sample * pick(0, 60) / 100 : 0;
    m.refuse_above = pick(0, 4) == 0 ? static_cast<int64_t>(pick(1, 5000)) : 0;
    // Never both: a narrow window of batches the rules take could lie between two doublings.
    if (m.refuse_above == 0 && pick(0, 3) == 0) m.refuse_below = static_cast<int64_t>(pick(1, 300));
    m.told = pick(0, 4) == 0 ? -1.0 : static_cast<double>(pick(0, 100)) / 100.0;
    m.limit = m.fixed + m.per_sample * pick(0, 1 << 21);
    const std::string what = fmt::format(
        "model {}: K {}, per sample {} (predicted {}), fixed {}, extra {} + {}/sample, "
        "refuse above {} below {}, told {}, limit {}",
        i, k, m.per_sample, m.predicted_per_sample, m.fixed, m.extra_fixed, m.extra_per_sample,
        m.refuse_above, m.refuse_below, m.told, m.limit);
    const MaxBatchResult r = search(m, k), p = search(m, k, false);
    expect_sound(m, k, r, what);
    expect_sound(m, k, p, what + " (plain)");
    // Eight guesses at most, then what the plain search would take at worst from there.
    const double most = 8 + 2 * std::ceil(std::log2(static_cast<double>(kMaxBatchSize / k))) + 2;
    EXPECT_LE(static_cast<double>(r.probes.size()), most) << what;
    guided += r.probes.size();
    plain += p.probes.size();
  }
  EXPECT_LT(guided * 2, plain) << guided << " guided probes against " << plain << " plain";
}
