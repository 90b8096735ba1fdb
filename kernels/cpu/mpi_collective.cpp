// The collective on the CPU backends: MPI_Iallreduce over MPI_COMM_WORLD, on the buffers in place
// (a CPU backend's tensors are host memory). Compiled only where CMake found MPI.
#define OMPI_SKIP_MPICXX 1  // the C API only: OpenMPI's C++ bindings are deprecated and unused
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <thread>
#include <vector>

#include "kernels/backend.h"
#include "kernels/collective.h"
#include "kernels/dtype.h"
#include "kernels/error.h"

namespace mpbench {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw_runtime(fmt::format("MPI: {} failed: {}", what, text));
}

// 16-bit sums: each pairwise sum in fp32, rounded back to the wire's dtype, as a reduction of
// bf16 (fp16) tensors computes it. MPI calls these with the partial results of the reduction.
template <float (*Decode)(uint16_t), uint16_t (*Encode)(float)>
void sum16(void* in, void* inout, int* len, MPI_Datatype*) {
  const auto* a = static_cast<const uint16_t*>(in);
  auto* b = static_cast<uint16_t*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = Encode(Decode(a[i]) + Decode(b[i]));
}

class MpiCollective final : public Collective {
 public:
  MpiCollective() {
    int initialized = 0;
    check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
    if (!initialized) check_mpi(MPI_Init(nullptr, nullptr), "MPI_Init");
    // Errors come back as codes, checked here, instead of MPI's default abort.
    check_mpi(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN),
              "MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &size_), "MPI_Comm_size");
    check_mpi(MPI_Op_create(&sum16<bf16_to_f32, f32_to_bf16>, 1, &bf16_sum_), "MPI_Op_create");
    check_mpi(MPI_Op_create(&sum16<f16_to_f32, f32_to_f16>, 1, &f16_sum_), "MPI_Op_create");
  }
  ~MpiCollective() override {
    MPI_Op_free(&bf16_sum_);
    MPI_Op_free(&f16_sum_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void start_all_reduce_sum(Backend& be, Tensor& buf, DType wire) override {
    MPB_CHECK(be.device() == Device::CPU && buf.device == Device::CPU,
              "the MPI all-reduce takes host buffers (a CPU backend's)");
    MPB_CHECK(buf.dtype == DType::F32, "gradients are fp32, not {}", dtype_name(buf.dtype));
    MPB_CHECK(wire == DType::F32 || wire == DType::BF16 || wire == DType::F16,
              "no all-reduce in {}", dtype_name(wire));
    be.synchronize();
    float* x = buf.ptr<float>();
    const int64_t n = buf.numel();
    if (wire == DType::F32) {
      in_chunks(n, [&](int64_t at, int count) {
        requests_.push_back(MPI_REQUEST_NULL);
        check_mpi(MPI_Iallreduce(MPI_IN_PLACE, x + at, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD,
                                 &requests_.back()),
                  "MPI_Iallreduce");
      });
      return;
    }
    const bool bf16 = wire == DType::BF16;
    // Each bucket in flight has its own 16-bit copy, kept until finish_all_reduces casts it back
    // (a vector moved when wires_ grows keeps its storage, which MPI is writing).
    if (started16_ == wires_.size()) wires_.emplace_back();
    Wire& w = wires_[started16_++];
    w.dst = x;
    w.bf16 = bf16;
    w.bits.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) w.bits[i] = bf16 ? f32_to_bf16(x[i]) : f32_to_f16(x[i]);
    in_chunks(n, [&](int64_t at, int count) {
      requests_.push_back(MPI_REQUEST_NULL);
      check_mpi(MPI_Iallreduce(MPI_IN_PLACE, w.bits.data() + at, count, MPI_UINT16_T,
                               bf16 ? bf16_sum_ : f16_sum_, MPI_COMM_WORLD, &requests_.back()),
                "MPI_Iallreduce");
    });
  }

  void progress() override {
    if (requests_.empty()) return;
    int done = 0;
    check_mpi(MPI_Testall(static_cast<int>(requests_.size()), requests_.data(), &done,
                          MPI_STATUSES_IGNORE),
              "MPI_Testall");
  }

  void finish_all_reduces(Backend&) override {
    check_mpi(
        MPI_Waitall(static_cast<int>(requests_.size()), requests_.data(), MPI_STATUSES_IGNORE),
        "MPI_Waitall");
    requests_.clear();
    for (size_t b = 0; b < started16_; ++b) {
      const Wire& w = wires_[b];
      for (size_t i = 0; i < w.bits.size(); ++i)
        w.dst[i] = w.bf16 ? bf16_to_f32(w.bits[i]) : f16_to_f32(w.bits[i]);
    }
    started16_ = 0;
  }

  void all_reduce_max(Backend& be, Tensor& buf) override {
    MPB_CHECK(be.device() == Device::CPU && buf.device == Device::CPU && buf.dtype == DType::F32,
              "the MPI max takes a CPU backend's fp32 buffers");
    be.synchronize();
    in_chunks(buf.numel(), [&](int64_t at, int count) {
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, buf.ptr<float>() + at, count, MPI_FLOAT, MPI_MAX,
                              MPI_COMM_WORLD),
                "MPI_Allreduce");
    });
  }

  void sum_host(double* v, size_t n) override { host_op(v, n, MPI_SUM); }
  void max_host(double* v, size_t n) override { host_op(v, n, MPI_MAX); }
  void min_host(double* v, size_t n) override { host_op(v, n, MPI_MIN); }

  void wait_for_all() override {
    MPI_Request req;
    check_mpi(MPI_Ibarrier(MPI_COMM_WORLD, &req), "MPI_Ibarrier");
    for (int done = 0;;) {
      check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
      if (done) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  std::vector<std::string> gather_strings(const std::string& mine) override {
    int len = static_cast<int>(mine.size());
    std::vector<int> lens(static_cast<size_t>(size_));
    check_mpi(MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD),
              "MPI_Allgather");
    std::vector<int> at(lens.size(), 0);
    for (size_t r = 1; r < lens.size(); ++r) at[r] = at[r - 1] + lens[r - 1];
    std::string all(static_cast<size_t>(at.back() + lens.back()), '\0');
    check_mpi(MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), at.data(),
                             MPI_CHAR, MPI_COMM_WORLD),
              "MPI_Allgatherv");
    std::vector<std::string> out;
    for (size_t r = 0; r < lens.size(); ++r) out.push_back(all.substr(at[r], lens[r]));
    return out;
  }

  [[noreturn]] void abort(int code) override {
    // mpirun forwards a rank's stderr through its own process, which stops reading it once the
    // abort reaches it: under load, the line the caller has just written was lost (1 run in ~40
    // on a busy 2-core machine). A pause lets it be read first; it costs a failing job 0.2 s.
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; should it, the process still ends
  }

 private:
  // MPI counts are ints: a buffer of more elements goes in pieces.
  template <typename F>
  static void in_chunks(int64_t n, F&& f) {
    constexpr int64_t kMax = INT_MAX / 2;
    for (int64_t at = 0; at < n; at += kMax) f(at, static_cast<int>(std::min(kMax, n - at)));
  }
  void host_op(double* v, size_t n, MPI_Op op) {
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, v, static_cast<int>(n), MPI_DOUBLE, op, MPI_COMM_WORLD),
              "MPI_Allreduce");
  }

  int rank_ = 0, size_ = 1;
  MPI_Op bf16_sum_ = MPI_OP_NULL, f16_sum_ = MPI_OP_NULL;
  std::vector<MPI_Request> requests_;  // the all-reduces started and not yet finished
  // A 16-bit form's bucket in flight: its cast values, and where they go back to.
  struct Wire {
    std::vector<uint16_t> bits;
    float* dst = nullptr;
    bool bf16 = true;
  };
  std::vector<Wire> wires_;  // the first started16_ are in flight; the rest kept for reuse
  size_t started16_ = 0;
};

}  // namespace

bool mpi_built(std::string*) {
  return true;
}

std::unique_ptr<Collective> make_mpi_collective() {
  return std::make_unique<MpiCollective>();
}

}  // namespace mpbench
