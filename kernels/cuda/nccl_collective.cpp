// The collective on the GPU: NCCL's all-reduce on a side stream, each bucket started once the
// CUDA backend's stream has computed its gradients and joined back before the gradients are
// read, so that it overlaps the rest of the backward (as DDP's buckets do). The ranks are found
// and the unique id handed round by MPI (the host collective, which also keeps the host values,
// agreement and abort). Compiled only where CMake found NCCL and MPI beside CUDA.
// Untested on a GPU: no machine here has two.
#include <nccl.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/collective.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/stream.h"

namespace mpbench {

namespace {

void check_nccl(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess)
    throw_runtime(fmt::format("NCCL: {} failed: {}", what, ncclGetErrorString(rc)));
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(std::unique_ptr<Collective> host, int device) : host_(std::move(host)) {
    ncclUniqueId id;
    std::memset(&id, 0, sizeof(id));
    if (host_->rank() == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    // Rank 0's id to every rank: the gather's first entry.
    const std::string all = host_->gather_strings(
        host_->rank() == 0 ? std::string(id.internal, sizeof(id.internal)) : std::string())[0];
    MPB_CHECK(all.size() == sizeof(id.internal), "NCCL id of {} bytes", all.size());
    std::memcpy(id.internal, all.data(), sizeof(id.internal));
    CUDA_CHECK(cudaSetDevice(device));
    check_nccl(ncclCommInitRank(&comm_, host_->size(), id, host_->rank()), "ncclCommInitRank");
    try {
      CUDA_CHECK(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
      CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
      CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    } catch (...) {
      // No destructor runs for an object whose constructor threw. Aborted, not destroyed: this
      // rank failed alone, and ncclCommDestroy may wait for the others.
      ncclCommAbort(comm_);
      comm_ = nullptr;
      release();
      throw;
    }
  }
  ~NcclCollective() override { release(); }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  void start_all_reduce_sum(Backend& be, Tensor& buf, DType wire) override {
    MPB_CHECK(buf.device == Device::CUDA && buf.dtype == DType::F32,
              "NCCL all-reduces the fp32 gradients on the GPU");
    MPB_CHECK(wire == DType::F32 || wire == DType::BF16 || wire == DType::F16,
              "no all-reduce in {}", dtype_name(wire));
    const size_t n = static_cast<size_t>(buf.numel());
    Tensor w = buf;
    if (wire != DType::F32) {
      // The cast bucket (bf16_compress_hook): cast on be's stream, summed in 16 bits by NCCL,
      // cast back in finish. Each bucket of a step has its own wire buffer.
      w = Tensor{wire_buffer(be, started_, n * 2), buf.shape, wire, Device::CUDA};
      be.cast(buf, w);
      casts_.push_back({w, buf});
    }
    // The side stream takes the bucket once be's stream has made it.
    CUDA_CHECK(cudaEventRecord(ready_, cuda_stream_of(be)));
    CUDA_CHECK(cudaStreamWaitEvent(side_, ready_, 0));
    auto& [t0, t1] = span(gen_, started_++);
    CUDA_CHECK(cudaEventRecord(t0, side_));
    check_nccl(ncclAllReduce(w.data, w.data, n,
                             wire == DType::F32    ? ncclFloat32
                             : wire == DType::BF16 ? ncclBfloat16
                                                   : ncclFloat16,
                             ncclSum, comm_, side_),
               "ncclAllReduce");
    CUDA_CHECK(cudaEventRecord(t1, side_));
  }

  void finish_all_reduces(Backend& be) override {
    CUDA_CHECK(cudaEventRecord(done_, side_));
    CUDA_CHECK(cudaStreamWaitEvent(cuda_stream_of(be), done_, 0));
    for (auto& [w, buf] : casts_) be.cast(w, buf);
    casts_.clear();
    timed_[gen_] = started_;
    started_ = 0;
    gen_ ^= 1;
  }

  std::optional<double> busy_ms(int back) override {
    // gen_ is the next step's set: the last finish's is the other, the one before it gen_ (its
    // events not yet recorded over: that happens as the next step's buckets start).
    const int g = back == 0 ? gen_ ^ 1 : gen_;
    double sum = 0;
    for (size_t i = 0; i < timed_[g]; ++i) {
      auto& [t0, t1] = spans_[g][i];
      CUDA_CHECK(cudaEventSynchronize(t1));
      float ms = 0;
      CUDA_CHECK(cudaEventElapsedTime(&ms, t0, t1));
      sum += ms;
    }
    return sum;
  }

  void all_reduce_max(Backend& be, Tensor& buf) override {
    MPB_CHECK(buf.device == Device::CUDA && buf.dtype == DType::F32,
              "NCCL's max takes fp32 buffers on the GPU");
    check_nccl(ncclAllReduce(buf.data, buf.data, static_cast<size_t>(buf.numel()), ncclFloat32,
                             ncclMax, comm_, cuda_stream_of(be)),
               "ncclAllReduce");
  }

  void sum_host(double* v, size_t n) override { host_->sum_host(v, n); }
  void max_host(double* v, size_t n) override { host_->max_host(v, n); }
  void min_host(double* v, size_t n) override { host_->min_host(v, n); }
  void wait_for_all() override { host_->wait_for_all(); }
  std::vector<std::string> gather_strings(const std::string& mine) override {
    return host_->gather_strings(mine);
  }
  [[noreturn]] void abort(int code) override {
    if (comm_) ncclCommAbort(comm_);
    host_->abort(code);
    std::_Exit(code);  // abort does not return; said again for the compiler
  }

 private:
  // Teardown: errors are not checked (nothing could be done about them here).
  void release() {
    for (auto& set : spans_) {
      for (auto& [a, b] : set) {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
      }
    }
    if (ready_) cudaEventDestroy(ready_);
    if (done_) cudaEventDestroy(done_);
    if (side_) cudaStreamDestroy(side_);
    for (auto& [p, bytes] : wires_) cudaFree(p);
    if (comm_) ncclCommDestroy(comm_);
    comm_ = nullptr;
  }

  // The timing events of the i-th bucket of a step of set g (steps alternate between two),
  // made once and reused.
  std::pair<cudaEvent_t, cudaEvent_t>& span(int g, size_t i) {
    while (spans_[g].size() <= i) {
      cudaEvent_t a = nullptr, b = nullptr;
      CUDA_CHECK(cudaEventCreate(&a));
      CUDA_CHECK(cudaEventCreate(&b));
      spans_[g].push_back({a, b});
    }
    return spans_[g][i];
  }
  // The i-th bucket's 16-bit buffer, made on first use and kept (a step's buckets have the same
  // sizes every step); the last use of a buffer that must grow is over once be's stream is.
  void* wire_buffer(Backend& be, size_t i, size_t bytes) {
    if (wires_.size() <= i) wires_.resize(i + 1, {nullptr, 0});
    auto& [p, have] = wires_[i];
    if (have < bytes) {
      if (p) {
        CUDA_CHECK(cudaStreamSynchronize(cuda_stream_of(be)));
        CUDA_CHECK(cudaFree(p));
        p = nullptr;
      }
      CUDA_CHECK(cudaMalloc(&p, bytes));
      have = bytes;
    }
    return p;
  }

  std::unique_ptr<Collective> host_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t side_ = nullptr;
  cudaEvent_t ready_ = nullptr, done_ = nullptr;
  // Two steps' bucket events, alternating (gen_: this step's), so that busy_ms can read a step
  // late; timed_[g]: the buckets of set g's step, set by its finish.
  std::array<std::vector<std::pair<cudaEvent_t, cudaEvent_t>>, 2> spans_;
  std::array<size_t, 2> timed_ = {0, 0};
  int gen_ = 0;
  size_t started_ = 0;  // buckets started this step
  // The 16-bit forms' buckets (outside the tracked allocator), one per bucket of a step.
  std::vector<std::pair<void*, size_t>> wires_;
  std::vector<std::pair<Tensor, Tensor>> casts_;  // (wire part, gradients) to cast back
};

}  // namespace

bool nccl_built(std::string*) {
  return true;
}

std::unique_ptr<Collective> make_nccl_collective(std::unique_ptr<Collective> host, int device) {
  return std::make_unique<NcclCollective>(std::move(host), device);
}

}  // namespace mpbench
