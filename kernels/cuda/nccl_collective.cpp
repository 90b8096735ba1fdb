// The collective on the GPU: NCCL's all-reduce on the CUDA backend's stream, the ranks found and
// the unique id handed round by MPI (the host collective, which also keeps the host values,
// agreement and abort). Compiled only where CMake found NCCL and MPI beside CUDA.
// Untested on a GPU: no machine here has two.
#include <nccl.h>

#include <cstdlib>
#include <cstring>

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
  }
  ~NcclCollective() override {
    if (wire_) cudaFree(wire_);
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }

  void all_reduce_mean(Backend& be, Tensor& buf, DType wire) override {
    MPB_CHECK(buf.device == Device::CUDA && buf.dtype == DType::F32,
              "NCCL all-reduces the fp32 gradients on the GPU");
    const cudaStream_t stream = cuda_stream_of(be);
    const size_t n = static_cast<size_t>(buf.numel());
    if (wire == DType::F32) {
      check_nccl(ncclAllReduce(buf.data, buf.data, n, ncclFloat32, ncclAvg, comm_, stream),
                 "ncclAllReduce");
      return;
    }
    MPB_CHECK(wire == DType::BF16 || wire == DType::F16, "no all-reduce in {}", dtype_name(wire));
    // The cast bucket: cast, averaged in 16 bits by NCCL, cast back (bf16_compress_hook).
    if (wire_bytes_ < n * 2) {
      if (wire_) CUDA_CHECK(cudaFree(wire_));
      wire_ = nullptr;
      CUDA_CHECK(cudaMalloc(&wire_, n * 2));
      wire_bytes_ = n * 2;
    }
    Tensor w{wire_, buf.shape, wire, Device::CUDA};
    be.cast(buf, w);
    check_nccl(ncclAllReduce(wire_, wire_, n, wire == DType::BF16 ? ncclBfloat16 : ncclFloat16,
                             ncclAvg, comm_, stream),
               "ncclAllReduce");
    be.cast(w, buf);
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
  std::unique_ptr<Collective> host_;
  ncclComm_t comm_ = nullptr;
  void* wire_ = nullptr;  // the 16-bit forms' bucket (outside the tracked allocator)
  size_t wire_bytes_ = 0;
};

}  // namespace

bool nccl_built(std::string*) {
  return true;
}

std::unique_ptr<Collective> make_nccl_collective(std::unique_ptr<Collective> host, int device) {
  return std::make_unique<NcclCollective>(std::move(host), device);
}

}  // namespace mpbench
