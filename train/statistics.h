#pragma once
// The statistics mpbench reports and gates on: a run's summary of its epoch times, the
// ratio of two runs' median times with a bootstrap confidence interval (`compare`), the seeds'
// intervals (`run --seeds`) and a rank test (`explain`'s slower ops). All are deterministic: the
// bootstrap draws from the fixed generators of models/rng.h.
#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpbench {

// The samples that can be times: finite and positive (a failed epoch's 0 or NaN are left out).
std::vector<double> positive_finite(const std::vector<double>& v);

struct TimeStats {
  double median = 0, mean = 0, stddev = 0, cv = 0, min = 0, max = 0;
};
TimeStats compute_time_stats(const std::vector<double>& samples);

struct RatioEstimate {
  double ratio = 0;  // median(current) / median(baseline)
  double lo = 0, hi = 0;
  bool valid = false;  // false when a side has no positive finite samples
  // paired_median_ratio from 2 rounds: the centre and spread of its t interval (the rounds' log
  // ratios' trimmed mean and Winsorized sd: below), what more rounds would narrow; 0 otherwise.
  double log_mean = 0, log_sd = 0;
};
// median(current) / median(baseline) over repetitions (runs), for `compare`. A side is its files
// (runs in separate processes: baselines remade on the runner), each file its repetitions (`run
// --repeat`), each repetition its epoch times. Each side's statistic is the median over all its
// repetitions of each repetition's median epoch time; the 95% percentile interval comes from a
// hierarchical bootstrap (draw the files with replacement, then the repetitions within each drawn
// file, then each drawn repetition's epochs), so that it holds the variation between processes and
// between runs, which is most of the noise, as well as within them. That holds only as far as a
// side has files to draw: a CI job's current side is one file, and identical runs' intervals
// excluded 1 in 30-35% of cases (an empirical QA on the native CPU). So from three files in all
// the interval is widened to the Student t interval of the files' log medians about the ratio:
// +-t(0.975, files - 2) x the sides' pooled spread x sqrt(1/baseline files + 1/current files).
// Deterministic for a given seed; repetitions with no usable sample are left out.
using Runs = std::vector<std::vector<std::vector<double>>>;
RatioEstimate hierarchical_median_ratio(const Runs& baseline, const Runs& current, int resamples,
                                        uint64_t seed);
// The ratio of two modes measured in the same rounds (`run --repeat`: each round trains every
// mode once, in turn, so that a drift of the machine lands on both sides of a round alike): the
// median over rounds of each round's median(current) / median(baseline), and its 95% interval:
// the hull of the percentile interval from a bootstrap of the rounds and, within each drawn
// round, of each side's epochs, and (from 2 rounds) the Student t interval of the rounds' log
// ratios, exp(mean +- t(0.975, n-1) * sd / sqrt(n)). The bootstrap's alone is about the range of
// the rounds' ratios at few rounds, which holds the true median only 1 - 2 (1/2)^n of the time
// (75% at 3 rounds; 27% of its "95%" intervals missed in simulation); the t interval holds it 95%
// of the time where the log ratios are near normal, and the bootstrap's is the wider one where a
// round or an epoch stands out. Pairing keeps what a round's drift does to both sides out of the
// interval, which unpaired medians let in (a busy round of one mode moved the estimate far off).
// From kTrimFromRounds rounds the t interval is Yuen's, 20% trimmed (trimmed_rounds a side): a
// shared machine's pair ratios have heavy tails (72 pairs of one build: 0.71x to 2.48x about a
// median of 1.00, sd of the logs 0.18-0.30), and four pairs of 1.25-2.48x in 24 moved the plain
// mean enough that rows `same` at 12 pairs were `inconclusive` at 24. Fewer rounds are not
// trimmed: trimming 1 of 6 cost power on normal noise (simulated: 1.3x caught 88% against 96%).
// Rounds with a side without usable samples are left out; deterministic for a given seed.
struct PairedRound {
  std::vector<double> baseline, current;  // one round's epoch times a side
};
RatioEstimate paired_median_ratio(const std::vector<PairedRound>& rounds, int resamples,
                                  uint64_t seed);
// The defaults of that interval wherever mpbench prints one (compare's gate, run's speedups): the
// resamples, the generator's seed ("mpbench"), and the fewest repetitions a side that it takes to
// say anything of the time (fewer hide the noise between runs, which is most of it).
inline constexpr int kBootstrapResamples = 2000;
inline constexpr uint64_t kBootstrapSeed = 0x6d7062656e6368;
inline constexpr int kMinRepetitions = 3;

// Mean and sample standard deviation (n - 1; 0 for a single value).
struct MeanStd {
  double mean = 0, std = 0;
  int n = 0;
};
MeanStd mean_std(const std::vector<double>& v);

// paired_median_ratio's t interval: from this many rounds trimmed, trimmed_rounds(n) (a fifth)
// a side; its half-width at n rounds whose (Winsorized) log ratios have this sd,
// t(0.975, h-1) * sd * sqrt((n-1) / (h (h-1))) with h = n - 2 trimmed_rounds(n) (Yuen's), or
// without `trim` h = n, t(0.975, n-1) * sd / sqrt(n).
inline constexpr int kTrimFromRounds = 10;
int trimmed_rounds(int n);
double t_half_width(double log_sd, int n, bool trim = true);
// The fewest rounds n, from `from` (>= 2) to `most`, at which that half-width is at most
// `half_width`; 0 where none is (or sd is not positive).
int rounds_for_half_width(double log_sd, double half_width, int from, int most, bool trim = true);

// The two-sided 97.5% quantile of Student's t with `dof` degrees of freedom (dof >= 1): 12.706
// for 1, 2.262 for 9, 1.96 in the limit.
double student_t_975(int dof);

// The mean of the paired differences current[i] - baseline[i] and its 95% interval
// mean +- t(0.975, n-1) * sd / sqrt(n) (a paired t interval: pairs share a seed, so what the seed
// does to both cancels). Needs n >= 2 pairs of equal length.
struct PairedDelta {
  double mean = 0, ci95_low = 0, ci95_high = 0;
  int n = 0;
};
PairedDelta paired_delta(const std::vector<double>& baseline, const std::vector<double>& current);

// The one-sided Mann-Whitney rank test that `current` tends to run longer than `baseline`: the
// chance, were both samples drawn from one distribution, of a U this large or larger (U counts
// the pairs in which the current value is the larger, ties a half). Exact while size() * size()
// <= exact_pairs, ties too (a permutation test on the midranks: the normal approximation is
// anti-conservative for few tied steps, p 0.038 for {1, 1, 2} against {3, 4, 5} where the exact
// tail is 0.05), else (as SciPy's) the normal approximation with the tie and continuity
// corrections. 1 when a side is empty. It asks no more of the times than that they vary alike in
// both samples, so one stalled step moves it little.
// The exact tail's work is the values x the smaller side x their summed doubled ranks: 20 against
// 20 about a million operations, 1 against 400 (not a case explain meets) some 64 million.
inline constexpr size_t kExactRankTestPairs = 400;
double rank_test_greater_p(const std::vector<double>& baseline, const std::vector<double>& current,
                           size_t exact_pairs = kExactRankTestPairs);

}  // namespace mpbench
