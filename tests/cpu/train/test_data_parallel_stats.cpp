// train/data_parallel.h's figure of a step's communication: the mean per step over the median
// epoch by time, as the step time is the median epoch's.
#include <gtest/gtest.h>

#include <vector>

#include "train/data_parallel.h"

namespace mpbench {
namespace {

std::vector<EpochResult> epochs(const std::vector<std::pair<double, int64_t>>& time_steps) {
  std::vector<EpochResult> out;
  for (const auto& [time, steps] : time_steps) {
    EpochResult e;
    e.time_ms = time;
    e.steps = steps;
    out.push_back(e);
  }
  return out;
}

TEST(MedianEpochMean, TheMiddleEpochOrTheTwoMiddleOnesAverage) {
  // Three epochs of 2 steps: per-step means 1, 5, 3; by time the middle is the third epoch.
  const std::vector<double> three = {1, 1, 5, 5, 2, 4};
  EXPECT_DOUBLE_EQ(median_epoch_mean(three, epochs({{10, 2}, {30, 2}, {20, 2}})), 3.0);
  // Two epochs: the average of both epochs' means (2 and 6), not the slower one's.
  const std::vector<double> two = {1, 3, 6, 6};
  EXPECT_DOUBLE_EQ(median_epoch_mean(two, epochs({{10, 2}, {20, 2}})), 4.0);
  // Four epochs of one step: the two middle by time (20 and 30 ms: 7 and 9).
  EXPECT_DOUBLE_EQ(median_epoch_mean({100, 7, 9, 0}, epochs({{40, 1}, {20, 1}, {30, 1}, {10, 1}})),
                   8.0);
}

TEST(MedianEpochMean, EntriesThatDoNotCoverTheEpochsGiveZero) {
  EXPECT_EQ(median_epoch_mean({1, 2, 3}, epochs({{10, 2}, {20, 2}})), 0.0);
  EXPECT_EQ(median_epoch_mean({1, 2}, epochs({{10, 0}})), 0.0);
  EXPECT_EQ(median_epoch_mean({}, {}), 0.0);
}

}  // namespace
}  // namespace mpbench
