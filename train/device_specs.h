#pragma once
// Datasheet ceilings per GPU, to report a run's achieved TFLOP/s as a share of what the card
// can do in that mode. Dense (no sparsity) tensor-core rates, as NVIDIA's datasheets give them;
// they are leads, not measurements (an H200 measured 788 TFLOP/s bf16 GEMM against 989 here).
#include <optional>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/precision.h"

namespace mpbench {

struct GpuDatasheet {
  const char* name;    // as matched against the device name ("H100 PCIe" before "H100")
  double fp32_tflops;  // plain FP32 (CUDA cores)
  double tf32_tflops;  // 0 where the card has no TF32 tensor cores
  double fp16_tflops;  // fp16 tensor cores, fp32 accumulate
  double bf16_tflops;  // 0 where the card has no bf16 tensor cores
  double fp8_tflops;   // fp8 tensor cores (Ada, Hopper); 0 where the card has none
  double memory_gbps;  // memory bandwidth, GB/s
};

const std::vector<GpuDatasheet>& gpu_datasheets();
// The datasheet entry whose name occurs in `device_name` (longest match), if any.
std::optional<GpuDatasheet> find_datasheet(const std::string& device_name);
// Peak TFLOP/s for a mode on that card (falls back to the fp32 rate where the mode has no
// tensor-core path, e.g. tf32 on a T4). amp_fp8's is the FP8 rate, the one its Linear GEMMs
// run at (its other GEMMs run at the bf16 rate), and 0 on a card without FP8 tensor cores.
double peak_tflops(const GpuDatasheet& d, Precision p);
// What a run's or an op's achieved rate is held against, per mode: on a GPU its datasheet peak
// and memory bandwidth; on the native CPU the GEMM rate the backend measured (DeviceInfo
// gemm_tflops_*; no bandwidth). Absent for the reference, a card not in the table, or a mode
// without a rate.
struct Ceilings {
  double peak_tflops = 0;  // the mode's dense peak
  double memory_gbps = 0;  // 0: unknown
};
std::optional<Ceilings> ceilings_for(const DeviceInfo& device, Precision p);
// Whether a compute capability has tensor cores for a mode (tf32 and bf16: sm_80+, fp16: sm_70+,
// fp8: sm_89+).
bool has_tensor_cores(int cc_major, int cc_minor, Precision p);
// Why a device cannot run mode p at all (amp_fp8 below compute capability 8.9; on the native CPU
// every mode but fp32 and amp_bf16), for the run's `unsupported` row; nullopt when it can (the
// CPU reference runs every mode).
std::optional<std::string> unsupported_reason(Precision p, Device device, const DeviceInfo& info);
// The native CPU backend's part of it (info.kind "cpu"): fp32 always, amp_bf16 where oneDNN has
// a bf16 kernel (AVX-512 and up), nothing else.
std::optional<std::string> native_cpu_unsupported_reason(Precision p, const DeviceInfo& info);

}  // namespace mpbench
