// models/shared_scratch.h: the buffers the layers of a model share, sized by their largest need.
#include <gtest/gtest.h>

#include "kernels/error.h"
#include "models/shared_scratch.h"
#include "test_util.h"

namespace mpbench {
namespace {

class SharedScratchTest : public test::CpuOpsTest {};

TEST_F(SharedScratchTest, EachSlotTakesItsLargestNeedOnceForTheBatch) {
  SharedScratch s(3);
  s.need_per_sample(0, 40);
  s.need_per_sample(0, 100);  // the larger of two layers' needs
  s.need_per_sample(0, 60);
  s.need_in_all(1, 1000, MemCategory::Gradients);
  // Slot 2 is never asked for: nothing is allocated for it.
  s.allocate(alloc, 8);
  EXPECT_EQ(alloc.current(MemCategory::Activations), 800u);
  EXPECT_EQ(alloc.current(MemCategory::Gradients), 1000u);
  // A second layer allocating with the same allocator and batch shares what is there.
  s.allocate(alloc, 8);
  EXPECT_EQ(alloc.current(MemCategory::Activations), 800u);

  // Views in any dtype and shape that fit, at the slot's memory.
  const Tensor a = s.view(0, Shape{8, 25}, DType::F32), b = s.view(0, Shape{400}, DType::BF16);
  EXPECT_EQ(a.data, b.data);
  EXPECT_EQ(b.dtype, DType::BF16);
  EXPECT_EQ(s.whole(0, DType::BF16).numel(), 400);
  EXPECT_EQ(s.whole(1, DType::F32).numel(), 250);
  EXPECT_THROW(s.view(0, Shape{201}, DType::F32), Error);
  EXPECT_THROW(s.view(2, Shape{1}, DType::F32), Error);
  // Another batch with the same allocator sizes the slots again, giving the last ones back.
  s.allocate(alloc, 16);
  EXPECT_EQ(s.whole(0, DType::F32).numel(), 400);
  EXPECT_EQ(alloc.current(MemCategory::Activations), 1600u);
  EXPECT_EQ(alloc.current(MemCategory::Gradients), 1000u);
  // A smaller one too: the slots are this batch's, not the largest batch's so far.
  s.allocate(alloc, 4);
  EXPECT_EQ(s.whole(0, DType::F32).numel(), 100);
  EXPECT_EQ(alloc.current(MemCategory::Activations), 400u);
}

// A refusal part way through leaves no slot of the old batch and no half-made new one: the next
// allocation, of the same batch with room, starts afresh and holds exactly that batch's slots.
TEST_F(SharedScratchTest, ARefusedAllocationIsMadeWholeByTheNext) {
  SharedScratch s(2);
  s.need_per_sample(0, 100);
  s.need_per_sample(1, 100);
  TrackingAllocator limited(*be);
  limited.set_limit(1300);
  s.allocate(limited, 4);  // 800 bytes
  try {
    s.allocate(limited, 8);  // slot 0's 800 fit once its 400 are back, slot 1's 800 then do not
    ADD_FAILURE() << "1600 bytes fitted a limit of 1300";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_oom()) << e.what();
  }
  EXPECT_EQ(limited.current(MemCategory::Activations), 800u);  // slot 0's, slot 1's given back
  limited.set_limit(2000);
  s.allocate(limited, 8);
  EXPECT_EQ(limited.current(MemCategory::Activations), 1600u);
  EXPECT_EQ(s.whole(1, DType::F32).numel(), 200);
}

// A slot's bytes round up to whole fp32 words, never down: 10 bytes a sample at batch 3 are 30
// bytes, 8 words. A need of negative bytes is refused, in both kinds of scratch.
TEST_F(SharedScratchTest, OddByteCountsRoundUpToWordsAndNegativeOnesAreRefused) {
  SharedScratch s(1);
  EXPECT_THROW(s.need_per_sample(0, -1), Error);
  s.need_per_sample(0, 10);
  s.allocate(alloc, 3);
  EXPECT_EQ(alloc.current(MemCategory::Activations), 32u);
  EXPECT_EQ(s.whole(0, DType::BF16).numel(), 16);
  GrowingScratch g(1);
  EXPECT_THROW(g.reserve(alloc, 0, -4), Error);
}

// GrowingScratch: a reserve with another allocator starts afresh (the last one's buffers are
// its own), and a larger reserve refused for memory leaves the slot empty, not holding the
// buffer it released first.
TEST_F(SharedScratchTest, GrowingSlotsFollowTheirAllocatorAndSurviveARefusal) {
  GrowingScratch g(1);
  g.reserve(alloc, 0, 100);
  const void* first = g.view(0, Shape{25}, DType::F32).data;
  TrackingAllocator other(*be);
  g.reserve(other, 0, 50);
  EXPECT_EQ(other.current(MemCategory::Activations), 52u);  // 13 fp32 words
  EXPECT_NE(g.view(0, Shape{13}, DType::F32).data, first);

  TrackingAllocator limited(*be);
  limited.set_limit(200);
  g.reserve(limited, 0, 100);
  try {
    g.reserve(limited, 0, 1000);
    ADD_FAILURE() << "1000 bytes fitted a limit of 200";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_oom()) << e.what();
  }
  EXPECT_EQ(limited.current(MemCategory::Activations), 0u);
  EXPECT_THROW(g.view(0, Shape{1}, DType::F32), Error);
  g.reserve(limited, 0, 100);
  EXPECT_EQ(limited.current(MemCategory::Activations), 100u);
}

TEST_F(SharedScratchTest, ASlotIsPerSampleOrInAllInOneCategory) {
  SharedScratch s(2);
  s.need_per_sample(0, 8);
  EXPECT_THROW(s.need_in_all(0, 8, MemCategory::Activations), Error);
  EXPECT_THROW(s.need_per_sample(0, 8, MemCategory::Gradients), Error);
  EXPECT_THROW(s.need_per_sample(2, 8), Error);
  s.allocate(alloc, 2);
  EXPECT_THROW(s.need_per_sample(1, 8), Error);  // after the allocation: too late
}

}  // namespace
}  // namespace mpbench
