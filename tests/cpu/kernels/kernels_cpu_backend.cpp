// The CPU backend's device side: info, aligned allocation and its out-of-memory error, events.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "kernels/allocator.h"
#include "kernels/backend.h"
#include "kernels/host_memory.h"
#include "test_util.h"

namespace mpbench {
namespace {

TEST(CpuBackend, DescribesTheHost) {
  auto be = make_reference_backend();
  EXPECT_EQ(be->device(), Device::CPU);
  const DeviceInfo info = be->info();
  EXPECT_EQ(info.kind, "reference");
  EXPECT_FALSE(info.name.empty());
  EXPECT_GT(info.cpu_threads, 0);
  EXPECT_GT(info.total_memory, size_t{1} << 20);
  EXPECT_FALSE(be->memory_info().has_value());
  EXPECT_EQ(be->workspace_bytes(), 0u);
  EXPECT_FALSE(be->supports_graphs());
  // OpenBLAS's threading as its build says it (Debian ships a pthreads and an OpenMP build).
  EXPECT_EQ(info.blas_threading == "openmp",
            info.blas_config.find("USE_OPENMP") != std::string::npos)
      << info.blas_threading << " from " << info.blas_config;
}

TEST(CpuBackend, AllocationsAre64ByteAlignedAndUsable) {
  auto be = make_reference_backend();
  for (size_t bytes : {size_t{0}, size_t{1}, size_t{63}, size_t{100}, size_t{1} << 20}) {
    void* p = be->raw_alloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 0xab, bytes);
    be->raw_free(p);
  }
  TrackingAllocator alloc(*be);
  Tensor t = alloc.alloc(Shape{3, 5}, DType::F16, MemCategory::Weights);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  EXPECT_EQ(alloc.current(MemCategory::Weights), 30u);
}

// A view of a buffer stays inside it: a slice from a negative offset or past the end, or a
// reshape to another element count, is refused, not a pointer past the allocation.
TEST(CpuBackend, ViewsStayInsideTheirBuffer) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  const Tensor t = alloc.alloc(Shape{4}, DType::F32, MemCategory::Activations);
  EXPECT_THROW(t.slice(-1, Shape{2}), Error);
  EXPECT_THROW(t.slice(3, Shape{2}), Error);
  EXPECT_EQ(t.slice(2, Shape{2}).data, static_cast<char*>(t.data) + 8);
  EXPECT_THROW(t.reshaped(Shape{3}), Error);
  EXPECT_THROW(t.reshaped(Shape{5}), Error);
  EXPECT_EQ(t.reshaped(Shape{2, 2}).shape, (Shape{2, 2}));
  EXPECT_EQ((Shape{128, 784}).str(), "(128, 784)");  // as the errors name shapes
  alloc.release(t);
}

// Training memory is every category but the dataset copy, peak over time, not a sum of peaks.
TEST(TrackingAllocator, TrainingPeakLeavesTheDataOut) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  Tensor data = alloc.alloc(Shape{1000}, DType::F32, MemCategory::Data);
  Tensor w = alloc.alloc(Shape{100}, DType::F32, MemCategory::Weights);
  Tensor a = alloc.alloc(Shape{50}, DType::F32, MemCategory::Activations);
  alloc.release(a);
  Tensor g = alloc.alloc(Shape{25}, DType::F32, MemCategory::Gradients);
  EXPECT_EQ(alloc.peak_training(), 600u);  // weights + activations, before those were freed
  EXPECT_EQ(alloc.peak_total(), 4600u);
  EXPECT_EQ(alloc.peak(MemCategory::Data), 4000u);
  // A category's peak outlives its buffers and smaller ones after them (the result's
  // by_category is of peaks).
  Tensor a2 = alloc.alloc(Shape{10}, DType::F32, MemCategory::Activations);
  EXPECT_EQ(alloc.peak(MemCategory::Activations), 200u);
  EXPECT_EQ(alloc.current(MemCategory::Activations), 40u);
  alloc.release(a2);
  alloc.release(g);
  alloc.release(w);
  alloc.release(data);
}

// Releasing the dataset copy gives back no training memory: the whole limit is still there for
// training after it, and after release_all.
TEST(TrackingAllocator, ReleasesKeepTheTrainingCountExact) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  alloc.set_limit(1000);
  alloc.release(alloc.alloc(Shape{500}, DType::F32, MemCategory::Data));
  Tensor w = alloc.alloc(Shape{250}, DType::F32, MemCategory::Weights);  // exactly the limit
  EXPECT_EQ(alloc.peak_training(), 1000u);
  alloc.release_all();
  EXPECT_EQ(alloc.current(MemCategory::Weights), 0u);
  alloc.alloc(Shape{250}, DType::F32, MemCategory::Weights);
  EXPECT_EQ(alloc.current(MemCategory::Weights), 1000u);
}

// A library's scratchpad of any byte count gets at least that many bytes (whole fp32 elements).
TEST(TrackingAllocator, AWorkspaceOfAnyByteCountIsCovered) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  const ConvWorkspaceProvider p = alloc.workspace_provider(1 << 20);
  for (const size_t bytes : {size_t{1}, size_t{5}, size_t{8}, size_t{1023}}) {
    const Tensor t = p.alloc(bytes);
    EXPECT_GE(t.bytes(), bytes);
    EXPECT_LT(t.bytes(), bytes + 4);
    p.release(t);
  }
  EXPECT_EQ(alloc.peak(MemCategory::Workspace), 1024u);
}

// A request past the limit is an oom that says what the run needed at least: the training
// memory in use plus the request (the dataset copy is not training memory).
TEST(TrackingAllocator, ARefusalAtTheLimitSaysWhatWasNeeded) {
  auto be = make_reference_backend();
  TrackingAllocator alloc(*be);
  alloc.set_limit(1000);
  Tensor data = alloc.alloc(Shape{500}, DType::F32, MemCategory::Data);
  Tensor w = alloc.alloc(Shape{100}, DType::F32, MemCategory::Weights);
  try {
    alloc.alloc(Shape{200}, DType::F32, MemCategory::Workspace);
    FAIL() << "800 bytes more than 400 in use fit a limit of 1000";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_oom());
    EXPECT_EQ(e.needed_bytes(), 1200u);
    // The excess exactly, which the rounded figures cannot show at the edge ("limit of 68.8
    // KiB: 8.6 KiB more with 60.2 KiB in use").
    EXPECT_EQ(std::string(e.what()),
              "over the memory limit of 1000 B: workspace asked for 800 B more with 400 B of "
              "training memory in use (200 B over)");
  }
  EXPECT_EQ(alloc.current(MemCategory::Workspace), 0u);
  alloc.release(w);
  alloc.release(data);
}

// The sizes are beyond what ASan serves: under MPBENCH_SANITIZE this test must run with
// ASAN_OPTIONS=allocator_may_return_null=1 (tests/CMakeLists.txt sets it), so that the request
// fails as it does without ASan instead of aborting the process.
// What raw_alloc(bytes) threw: an oom error (exit 3) is expected; "" when it did not throw.
std::string oom_of(Backend& be, size_t bytes) {
  try {
    be.raw_free(be.raw_alloc(bytes));
    ADD_FAILURE() << "allocating " << bytes << " bytes succeeded";
    return "";
  } catch (const Error& e) {
    EXPECT_TRUE(e.is_oom());
    EXPECT_EQ(e.exit_code(), 3);
    return e.what();
  }
}

TEST(CpuBackend, FailedAllocationIsAnOomError) {
  auto be = make_reference_backend();
  for (size_t bytes : {SIZE_MAX - 8, size_t{1} << 62}) {
    const std::string what = oom_of(*be, bytes);
    EXPECT_NE(what.find(std::to_string(bytes)), std::string::npos) << what;
  }
}

// All of the host's memory at once is refused with an oom error, before the kernel's OOM killer
// can be met: overcommit handed the pages out (a malloc of MemTotal succeeds), and their first
// touch killed the process. MemTotal, always above MemAvailable, whatever other processes free
// meanwhile: the check refuses it every time, and nothing is touched.
TEST(CpuBackend, MoreThanTheHostCanGiveIsAnOomError) {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  while (meminfo >> key >> kb && key != "MemTotal:") meminfo.ignore(256, '\n');
  if (key != "MemTotal:" || kb == 0) GTEST_SKIP() << "no MemTotal in /proc/meminfo";
  const size_t bytes = kb * 1024;
  auto be = make_reference_backend();
  const std::string what = oom_of(*be, bytes);
  EXPECT_NE(what.find("kept for the system"), std::string::npos) << what;
}

// A container's memory limit, read as the kernel enforces it: a cgroup tree in a temporary
// folder, laid out as /sys/fs/cgroup and /proc/self/cgroup are in each setup.
class CgroupMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::temp_directory_path() /
            ("mpbench_cgroup_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void file(const std::string& rel, const std::string& text) {
    const auto p = root_ / rel;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // A v1 memory cgroup under the mount (dir "" for its root): its limit and usage files.
  void v1(const std::string& dir, const std::string& limit, const std::string& usage) {
    const std::string at = "fs/memory/" + (dir.empty() ? "" : dir + "/");
    file(at + "memory.limit_in_bytes", limit + "\n");
    file(at + "memory.usage_in_bytes", usage + "\n");
  }
  CgroupMemory read(const std::string& proc_self_cgroup) {
    file("proc_self_cgroup", proc_self_cgroup);
    return cgroup_memory((root_ / "fs").string(), (root_ / "proc_self_cgroup").string());
  }
  std::filesystem::path root_;
};

// cgroup v2 under a cgroup namespace (Docker's default): the path is "/" and the mount is the
// container's cgroup. Inactive file pages are not counted: reclaim frees them before any kill.
TEST_F(CgroupMemoryTest, V2LimitLessTheUsageThatReclaimCannotFree) {
  file("fs/memory.max", "1073741824\n");
  file("fs/memory.current", "600000000\n");
  file("fs/memory.stat", "anon 400000000\nfile 200000000\ninactive_file 100000000\n");
  const CgroupMemory cg = read("0::/\n");
  ASSERT_TRUE(cg.limited());
  EXPECT_EQ(cg.limit, size_t{1073741824});
  EXPECT_EQ(cg.usage, size_t{500000000});
  EXPECT_EQ(cg.left(), size_t{573741824});
}

TEST_F(CgroupMemoryTest, V2MaxAndNoFilesMeanNoLimit) {
  file("fs/memory.max", "max\n");
  file("fs/memory.current", "600000000\n");
  EXPECT_FALSE(read("0::/\n").limited());
  EXPECT_FALSE(read("").limited());
  EXPECT_FALSE(read("0::/not/there\n").limited());
  EXPECT_FALSE(cgroup_memory((root_ / "fs").string(), (root_ / "missing").string()).limited());
}

// cgroup v1 without a namespace: the path names the container's cgroup from the host's root.
// Here the mount holds the whole tree, and an ancestor's limit is the tighter one; v1's "no
// limit" (a page multiple near 2^63) at the root is none.
TEST_F(CgroupMemoryTest, V1TakesTheTightestAncestor) {
  v1("", "9223372036854771712", "5000000000");
  v1("docker", "2000000000", "1500000000");
  file("fs/memory/docker/memory.stat", "cache 9\ntotal_inactive_file 100000000\n");
  v1("docker/abc", "3000000000", "1000000000");
  const CgroupMemory cg = read("5:cpuacct,cpu:/docker/abc\n4:memory:/docker/abc\n0::/\n");
  ASSERT_TRUE(cg.limited());
  EXPECT_EQ(cg.limit, size_t{2000000000});
  EXPECT_EQ(cg.left(), size_t{600000000});
  EXPECT_EQ(std::filesystem::path(cg.dir).filename(), "docker");
}

// What matters is what is left: an ancestor nearly full binds before a child of a lower limit.
TEST_F(CgroupMemoryTest, TheTightestIsTheOneWithLeastLeft) {
  v1("docker", "4000000000", "3900000000");
  v1("docker/abc", "2000000000", "500000000");
  const CgroupMemory cg = read("4:memory:/docker/abc\n");
  ASSERT_TRUE(cg.limited());
  EXPECT_EQ(cg.left(), size_t{100000000});
  EXPECT_EQ(std::filesystem::path(cg.dir).filename(), "docker");
}

// v1's "no limit" alone is no limit, at any level.
TEST_F(CgroupMemoryTest, V1NoLimitAloneIsNone) {
  v1("", "9223372036854771712", "5000000000");
  EXPECT_FALSE(read("4:memory:/\n").limited());
}

// The hybrid layout (systemd's): v1 controllers beside v2 mounted at unified/.
TEST_F(CgroupMemoryTest, V2UnderUnifiedBesideV1) {
  file("fs/unified/memory.max", "1073741824\n");
  file("fs/unified/memory.current", "73741824\n");
  const CgroupMemory cg = read("0::/\n");
  ASSERT_TRUE(cg.limited());
  EXPECT_EQ(cg.limit, size_t{1073741824});
  EXPECT_EQ(cg.left(), size_t{1000000000});
}

// Docker on cgroup v1: /proc/self/cgroup names /docker/ID, but the mount is that cgroup alone.
TEST_F(CgroupMemoryTest, V1MountOfTheContainersOwnCgroup) {
  v1("", "4294967296", "294967296");
  const CgroupMemory cg = read("12:memory,hugetlb:/docker/0123abcd\n");
  ASSERT_TRUE(cg.limited());
  EXPECT_EQ(cg.left(), size_t{4000000000});
}

TEST(CpuBackend, EventsMeasureWallTime) {
  auto be = make_reference_backend();
  auto start = be->create_event(), stop = be->create_event();
  // The upper bound is a clock around the events, not a speed: a loaded machine may sleep long.
  const auto outer_start = std::chrono::steady_clock::now();
  start->record();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  stop->record();
  be->synchronize();
  const double outer_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - outer_start)
          .count();
  const double ms = stop->elapsed_ms(*start);
  EXPECT_GE(ms, 19.0);
  EXPECT_LE(ms, outer_ms);
  auto never = be->create_event();
  EXPECT_THROW(never->elapsed_ms(*start), Error);
  EXPECT_THROW(stop->elapsed_ms(*never), Error);  // from a start never recorded
}

// The shared checks let an elementwise op write over an input only in the input's dtype: a
// parallel loop writing narrower or wider elements would overrun ones not read yet.
class CpuInPlace : public test::CpuOpsTest {};

TEST_F(CpuInPlace, OnlyInTheInputsDtype) {
  const auto refused = [](const std::function<void()>& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what()).find("with another dtype") != std::string::npos;
    }
    return false;
  };
  const std::vector<float> v = {0.5f, -1.0f, 2.0f, 0.25f, 1.5f, -0.75f, 3.0f, 1.0f};
  Tensor x = make(Shape{2, 4}, DType::F32, v), x16 = x.viewed_as(Shape{2, 4}, DType::BF16);
  Tensor dy = make(Shape{2, 4}, DType::F32, v), dy16 = dy.viewed_as(Shape{2, 4}, DType::BF16);
  Tensor xb = make(Shape{2, 4}, DType::BF16, v);
  Tensor gamma = make(Shape{4}, DType::F32, {1, 1, 1, 1}),
         beta = make(Shape{4}, DType::F32, {0, 0, 0, 0});
  Tensor mean = poisoned(Shape{2}, DType::F32), rstd = poisoned(Shape{2}, DType::F32);
  Tensor dg = poisoned(Shape{4}, DType::F32), db = poisoned(Shape{4}, DType::F32);
  EXPECT_TRUE(refused([&] { be->add(x, dy, x16); }));
  EXPECT_TRUE(refused([&] { be->add(dy, x, x16); }));
  EXPECT_TRUE(refused([&] { be->layernorm_forward(1e-5f, x, gamma, beta, x16, mean, rstd); }));
  EXPECT_TRUE(refused([&] { be->layernorm_backward(dy, xb, gamma, mean, rstd, dy16, dg, db); }));
  Tensor m4 = make(Shape{4}, DType::F32, {0, 0, 0, 0}),
         r4 = make(Shape{4}, DType::F32, {1, 1, 1, 1});
  Tensor dxb = poisoned(Shape{2, 4}, DType::BF16);
  EXPECT_TRUE(
      refused([&] { be->batchnorm_backward(dy, nullptr, xb, gamma, m4, r4, dxb, dg, db, &dy16); }));
  Tensor s = make(Shape{2, 2, 2}, DType::F32, v), s16 = s.viewed_as(Shape{2, 2, 2}, DType::BF16);
  Tensor p = make(Shape{2, 2, 2}, DType::F32, v), ds = make(Shape{2, 2, 2}, DType::F32, v);
  Tensor ds16 = ds.viewed_as(Shape{2, 2, 2}, DType::BF16);
  EXPECT_TRUE(refused([&] { be->attention_softmax_forward(s, 0.5f, false, s16); }));
  EXPECT_TRUE(refused([&] { be->attention_softmax_backward(ds, p, 0.5f, ds16); }));
  // In the input's own dtype they run.
  be->add(x, dy, x);
  EXPECT_EQ(test::to_host_f32(*be, x)[0], 1.0f);
  be->attention_softmax_backward(ds, p, 0.5f, ds);
}

}  // namespace
}  // namespace mpbench
