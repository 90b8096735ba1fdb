#pragma once
// The statistics mpbench reports and gates on: a run's summary of its epoch times, and the
// ratio of two runs' median times with a bootstrap confidence interval (`compare`). Both are
// deterministic: the bootstrap draws from the fixed generators of models/rng.h.
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
};
// median(current) / median(baseline) and its 95% percentile bootstrap CI (deterministic for a
// given seed). Non-finite and non-positive samples are ignored.
RatioEstimate bootstrap_median_ratio(const std::vector<double>& baseline,
                                     const std::vector<double>& current, int resamples,
                                     uint64_t seed);

}  // namespace mpbench
