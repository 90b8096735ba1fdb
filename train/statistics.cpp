#include "train/statistics.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "kernels/error.h"
#include "models/rng.h"

namespace mpbench {

namespace {

// The generators of models/rng.h: their output is fixed by their definition, unlike std::
// distributions whose results differ between standard libraries; the bootstrap must print the
// same CI everywhere.
size_t below(uint64_t& state, size_t n) {  // multiply-high: unbiased enough for n << 2^32
  return static_cast<size_t>((static_cast<unsigned __int128>(splitmix64(state)) * n) >> 64);
}

// Resampling n epochs n times costs n per resample; past this many, the resample's median is
// drawn directly from its distribution instead (median_of_resample), so that a file with a
// million epochs compares in a second rather than minutes. Below it, the textbook resampling.
constexpr size_t kDirectResampleMax = 10000;

// The median of n draws with replacement from `sorted` (ascending), sampled exactly without
// drawing them: the draws are floor(n U_i) for uniform U_i, so their k-th smallest is
// floor(n U_(k)) with U_(k) ~ Beta(k, n - k + 1); for even n the next order statistic is the
// smallest of the n - k uniforms above U_(k).
double median_of_resample(const std::vector<double>& sorted, Rng& rng) {
  const size_t n = sorted.size();
  const size_t k = (n + 1) / 2;  // 1-based rank of the (lower) median
  const double x = rng.gamma(static_cast<double>(k));
  const double u = x / (x + rng.gamma(static_cast<double>(n - k + 1)));
  auto at = [&](double q) {
    return sorted[std::min(n - 1, static_cast<size_t>(q * static_cast<double>(n)))];
  };
  if (n % 2 == 1) return at(u);
  const double next =
      u + (1 - u) * (1 - std::pow(rng.uniform01(), 1.0 / static_cast<double>(n - k)));
  return 0.5 * (at(u) + at(next));
}

double median_of(std::vector<double>& v) {
  const size_t n = v.size();
  std::nth_element(v.begin(), v.begin() + n / 2, v.end());
  const double upper = v[n / 2];
  if (n % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + n / 2);
  return 0.5 * (lower + upper);
}

// Linear interpolation between order statistics of a sorted vector.
double quantile_sorted(const std::vector<double>& s, double q) {
  const double pos = q * static_cast<double>(s.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  const size_t j = std::min(i + 1, s.size() - 1);
  const double f = pos - static_cast<double>(i);
  return s[i] + f * (s[j] - s[i]);
}

// The draws of one bootstrap: indices (below) and the median of a resample of one sample's
// sorted epoch times, both from the seed's generators, in the order they are asked for.
class Resampler {
 public:
  explicit Resampler(uint64_t seed) : state_(seed), rng_(seed, 1) {}
  size_t index(size_t n) { return below(state_, n); }
  double median(const std::vector<double>& sorted) {
    if (sorted.size() > kDirectResampleMax) return median_of_resample(sorted, rng_);
    scratch_.resize(sorted.size());
    for (double& x : scratch_) x = sorted[below(state_, sorted.size())];
    return median_of(scratch_);
  }

 private:
  uint64_t state_;
  Rng rng_;
  std::vector<double> scratch_;
};

// The 95% percentile interval of the bootstrap's ratios (sorted here) into est; no resample
// leaves the point estimate as a zero-width interval.
void set_percentile_interval(std::vector<double>& ratios, RatioEstimate& est) {
  if (ratios.empty()) {
    est.lo = est.hi = est.ratio;
    return;
  }
  std::sort(ratios.begin(), ratios.end());
  est.lo = quantile_sorted(ratios, 0.025);
  est.hi = quantile_sorted(ratios, 0.975);
}

}  // namespace

std::vector<double> positive_finite(const std::vector<double>& v) {
  std::vector<double> out;
  for (double x : v)
    if (std::isfinite(x) && x > 0) out.push_back(x);
  return out;
}

TimeStats compute_time_stats(const std::vector<double>& samples) {
  TimeStats st;
  const size_t n = samples.size();
  if (n == 0) return st;
  std::vector<double> s = samples;
  std::sort(s.begin(), s.end());
  st.min = s.front();
  st.max = s.back();
  st.median = (n % 2 == 1) ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
  double sum = 0;
  for (double v : s) sum += v;
  st.mean = sum / static_cast<double>(n);
  if (n >= 2) {
    double ss = 0;
    for (double v : s) ss += (v - st.mean) * (v - st.mean);
    st.stddev = std::sqrt(ss / static_cast<double>(n - 1));
  }
  st.cv = st.mean != 0 ? st.stddev / st.mean : 0;
  return st;
}

RatioEstimate hierarchical_median_ratio(const Runs& baseline, const Runs& current, int resamples,
                                        uint64_t seed) {
  RatioEstimate est;
  // Each side's files, each file's repetitions: their usable epoch times, sorted (for
  // median_of_resample); empty repetitions and files left out.
  auto clean = [](const Runs& side) {
    Runs out;
    for (const auto& file : side) {
      std::vector<std::vector<double>> reps;
      for (const auto& rep : file) {
        std::vector<double> t = positive_finite(rep);
        if (t.empty()) continue;
        std::sort(t.begin(), t.end());
        reps.push_back(std::move(t));
      }
      if (!reps.empty()) out.push_back(std::move(reps));
    }
    return out;
  };
  const Runs b = clean(baseline), c = clean(current);
  if (b.empty() || c.empty()) return est;
  auto median_of_medians = [](const Runs& side) {
    std::vector<double> m;
    for (const auto& file : side)
      for (auto rep : file) m.push_back(median_of(rep));
    return median_of(m);
  };
  est.ratio = median_of_medians(c) / median_of_medians(b);
  est.valid = true;
  Resampler draw(seed);
  std::vector<double> medians;
  // Files, then the repetitions within each drawn file, then the epochs within each repetition.
  auto resample = [&](const Runs& side) {
    medians.clear();
    for (size_t f = 0; f < side.size(); ++f) {
      const auto& file = side[draw.index(side.size())];
      for (size_t i = 0; i < file.size(); ++i)
        medians.push_back(draw.median(file[draw.index(file.size())]));
    }
    return median_of(medians);
  };
  std::vector<double> ratios;
  ratios.reserve(static_cast<size_t>(std::max(resamples, 1)));
  for (int i = 0; i < resamples; ++i) {
    const double mb = resample(b);
    ratios.push_back(resample(c) / mb);
  }
  set_percentile_interval(ratios, est);
  // Widened to the Student t interval of the files' log medians (statistics.h): the bootstrap
  // draws a side's files from those it has, so a current side of one file puts none of the
  // difference between processes into the interval.
  std::vector<double> lb, lc;
  for (const auto& [side, logs] : {std::pair{&b, &lb}, std::pair{&c, &lc}})
    for (const auto& file : *side) logs->push_back(std::log(median_of_medians({file})));
  const int dof = static_cast<int>(lb.size() + lc.size()) - 2;
  if (dof >= 1) {
    const MeanStd mb = mean_std(lb), mc = mean_std(lc);
    const double pooled = std::sqrt(((mb.n - 1) * mb.std * mb.std + (mc.n - 1) * mc.std * mc.std) /
                                    static_cast<double>(dof));
    const double half = student_t_975(dof) * pooled * std::sqrt(1.0 / mb.n + 1.0 / mc.n);
    est.lo = std::min(est.lo, est.ratio * std::exp(-half));
    est.hi = std::max(est.hi, est.ratio * std::exp(half));
  }
  return est;
}

RatioEstimate paired_median_ratio(const std::vector<PairedRound>& rounds, int resamples,
                                  uint64_t seed) {
  RatioEstimate est;
  // Each round's usable epoch times a side, sorted (for median_of_resample); a round with a side
  // empty is left out.
  std::vector<std::pair<std::vector<double>, std::vector<double>>> r;
  for (const PairedRound& p : rounds) {
    std::vector<double> b = positive_finite(p.baseline), c = positive_finite(p.current);
    if (b.empty() || c.empty()) continue;
    std::sort(b.begin(), b.end());
    std::sort(c.begin(), c.end());
    r.emplace_back(std::move(b), std::move(c));
  }
  if (r.empty()) return est;
  std::vector<double> ratios;
  for (auto [b, c] : r) ratios.push_back(median_of(c) / median_of(b));
  est.ratio = median_of(ratios);
  est.valid = true;
  Resampler draw(seed);
  std::vector<double> round_ratios, medians;
  medians.reserve(static_cast<size_t>(std::max(resamples, 1)));
  for (int i = 0; i < resamples; ++i) {
    round_ratios.clear();
    for (size_t k = 0; k < r.size(); ++k) {
      const auto& [b, c] = r[draw.index(r.size())];
      const double mb = draw.median(b);
      round_ratios.push_back(draw.median(c) / mb);
    }
    medians.push_back(median_of(round_ratios));
  }
  set_percentile_interval(medians, est);
  // Widened to the (trimmed) Student t interval of the rounds' log ratios (statistics.h): the
  // bootstrap's of a median of few rounds is about their range, which holds the true median 75%
  // of the time at 3 rounds.
  if (ratios.size() >= 2) {
    for (double& x : ratios) x = std::log(x);
    std::sort(ratios.begin(), ratios.end());
    const int n = static_cast<int>(ratios.size()), g = trimmed_rounds(n);
    // Yuen's: the mean of the rounds left after trimming g a side, and the spread of all with
    // those g Winsorized (set to the nearest kept value).
    const std::vector<double> kept(ratios.begin() + g, ratios.end() - g);
    std::vector<double> winsorized = ratios;
    std::fill(winsorized.begin(), winsorized.begin() + g, kept.front());
    std::fill(winsorized.end() - g, winsorized.end(), kept.back());
    est.log_mean = mean_std(kept).mean;
    est.log_sd = mean_std(winsorized).std;
    const double half = t_half_width(est.log_sd, n);
    est.lo = std::min(est.lo, std::exp(est.log_mean - half));
    est.hi = std::max(est.hi, std::exp(est.log_mean + half));
  }
  return est;
}

int trimmed_rounds(int n) {
  return n >= kTrimFromRounds ? n / 5 : 0;
}

double t_half_width(double log_sd, int n, bool trim) {
  MPB_CHECK(n >= 2, "t_half_width: {} rounds", n);
  const double h = n - 2 * (trim ? trimmed_rounds(n) : 0);
  return student_t_975(static_cast<int>(h) - 1) * log_sd * std::sqrt((n - 1) / (h * (h - 1)));
}

int rounds_for_half_width(double log_sd, double half_width, int from, int most, bool trim) {
  if (!(log_sd > 0) || !(half_width > 0)) return 0;
  for (int n = std::max(from, 2); n <= most; ++n)
    if (t_half_width(log_sd, n, trim) <= half_width) return n;
  return 0;
}

MeanStd mean_std(const std::vector<double>& v) {
  MeanStd m;
  m.n = static_cast<int>(v.size());
  if (v.empty()) return m;
  double sum = 0;
  for (double x : v) sum += x;
  m.mean = sum / static_cast<double>(v.size());
  if (v.size() > 1) {
    double sq = 0;
    for (double x : v) sq += (x - m.mean) * (x - m.mean);
    m.std = std::sqrt(sq / static_cast<double>(v.size() - 1));
  }
  return m;
}

double student_t_975(int dof) {
  MPB_CHECK(dof >= 1, "student_t_975: {} degrees of freedom", dof);
  // The table to 30, then the Cornish-Fisher expansion, within 1e-4 of the exact quantile.
  static const double kTable[] = {12.7062, 4.3027, 3.1824, 2.7764, 2.5706, 2.4469, 2.3646, 2.3060,
                                  2.2622,  2.2281, 2.2010, 2.1788, 2.1604, 2.1448, 2.1314, 2.1199,
                                  2.1098,  2.1009, 2.0930, 2.0860, 2.0796, 2.0739, 2.0687, 2.0639,
                                  2.0595,  2.0555, 2.0518, 2.0484, 2.0452, 2.0423};
  if (dof <= 30) return kTable[dof - 1];
  const double z = 1.959964, n = static_cast<double>(dof);
  const double z3 = z * z * z, z5 = z3 * z * z;
  return z + (z3 + z) / (4 * n) + (5 * z5 + 16 * z3 + 3 * z) / (96 * n * n);
}

PairedDelta paired_delta(const std::vector<double>& baseline, const std::vector<double>& current) {
  MPB_CHECK(baseline.size() == current.size() && baseline.size() >= 2,
            "paired_delta: {} and {} values (two or more pairs needed)", baseline.size(),
            current.size());
  std::vector<double> d(baseline.size());
  for (size_t i = 0; i < d.size(); ++i) d[i] = current[i] - baseline[i];
  const MeanStd m = mean_std(d);
  const double half = student_t_975(m.n - 1) * m.std / std::sqrt(static_cast<double>(m.n));
  return {m.mean, m.mean - half, m.mean + half, m.n};
}

double rank_test_greater_p(const std::vector<double>& baseline, const std::vector<double>& current,
                           size_t exact_pairs) {
  const size_t n = baseline.size(), m = current.size();
  if (n == 0 || m == 0) return 1.0;
  // U from the current values' ranks among all (ties: their mean rank), and the ties' sizes.
  std::vector<std::pair<double, bool>> all;  // (value, is current)
  for (double b : baseline) all.push_back({b, false});
  for (double c : current) all.push_back({c, true});
  std::sort(all.begin(), all.end());
  double rank_sum = 0, ties = 0;  // ties: sum of t^3 - t over the groups of equal values
  for (size_t a = 0, b = 0; a < all.size(); a = b) {
    size_t in_current = 0;
    for (b = a; b < all.size() && all[b].first == all[a].first; ++b) in_current += all[b].second;
    const double t = static_cast<double>(b - a);
    rank_sum += static_cast<double>(in_current) * (static_cast<double>(a + b) + 1) / 2;
    ties += t * t * t - t;
  }
  const double nn = static_cast<double>(n), mm = static_cast<double>(m), big = nn + mm;
  const double u = rank_sum - mm * (mm + 1) / 2;
  if (n * m <= exact_pairs) {
    // Exact, ties too (a permutation test on the midranks): of the C(n+m, k) ways to deal the
    // pooled ranks to the smaller side's k values, the share at least as extreme as observed.
    // Doubled ranks are whole numbers; ways[j][s]: the subsets of j ranks whose doubled sum is s.
    std::vector<size_t> rank2;  // each value's doubled midrank
    for (size_t a = 0, b = 0; a < all.size(); a = b) {
      for (b = a; b < all.size() && all[b].first == all[a].first; ++b) {
      }
      rank2.insert(rank2.end(), b - a, a + b + 1);
    }
    const size_t k = std::min(n, m);
    size_t total2 = 0;
    for (size_t r : rank2) total2 += r;
    std::vector<std::vector<double>> ways(k + 1, std::vector<double>(total2 + 1, 0.0));
    ways[0][0] = 1;
    for (size_t i = 0; i < rank2.size(); ++i)
      for (size_t j = std::min(i + 1, k); j >= 1; --j)
        for (size_t x = total2; x >= rank2[i]; --x) ways[j][x] += ways[j - 1][x - rank2[i]];
    // The current side's doubled rank sum at least the observed one; dealt to the baseline side
    // (the smaller), its sum at most the rest.
    const auto observed = static_cast<size_t>(std::llround(2 * rank_sum));
    double all_ways = 0, tail = 0;
    for (size_t x = 0; x <= total2; ++x) {
      all_ways += ways[k][x];
      if (k == m ? x >= observed : x + observed <= total2) tail += ways[k][x];
    }
    return tail / all_ways;
  }
  const double var = nn * mm / 12.0 * ((big + 1) - ties / (big * (big - 1)));
  if (!(var > 0)) return 1.0;  // every value equal
  const double z = (u - nn * mm / 2 - 0.5) / std::sqrt(var);
  return 0.5 * std::erfc(z / std::sqrt(2.0));
}

}  // namespace mpbench
