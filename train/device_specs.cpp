#include "train/device_specs.h"

#include <algorithm>
#include <cctype>
#include <cstring>

#include <fmt/format.h>

namespace mpbench {

const std::vector<GpuDatasheet>& gpu_datasheets() {
  // name          fp32   tf32   fp16   bf16    fp8    GB/s   (dense; SXM parts unless named)
  static const std::vector<GpuDatasheet> table = {
      {"T4", 8.1, 0, 65, 0, 0, 320},
      {"A10", 31.2, 62.5, 125, 125, 0, 600},
      {"L4", 30.3, 60, 121, 121, 242.5, 300},
      {"L40S", 91.6, 183, 362, 362, 733, 864},
      {"A100-SXM4-80GB", 19.5, 156, 312, 312, 0, 2039},
      {"A100 80GB PCIe", 19.5, 156, 312, 312, 0, 1935},  // as the driver names it
      {"A100", 19.5, 156, 312, 312, 0, 1555},
      {"H100 PCIe", 51, 378, 756, 756, 1513, 2000},
      {"H100 NVL", 60, 418, 835, 835, 1671, 3900},
      {"H100", 67, 494.7, 989.4, 989.4, 1979, 3350},
      {"H200 NVL", 60, 418, 835, 835, 1671, 4800},
      {"H200", 67, 494.7, 989.4, 989.4, 1979, 4800},
      {"GH200", 67, 494.7, 989.4, 989.4, 1979, 4000},  // 96 GB HBM3 part
  };
  return table;
}

// Whether `name` occurs in `device_name` as a whole word: "L4" is not in "NVIDIA L40" (a card of
// 3x its rates), nor "A10" in "NVIDIA A10G"; "A100" is in "NVIDIA A100-PCIE-40GB".
static bool names_row(const std::string& device_name, const char* name) {
  const auto word = [&](size_t i) {
    return i < device_name.size() && std::isalnum(static_cast<unsigned char>(device_name[i]));
  };
  const size_t n = std::strlen(name);
  for (size_t at = device_name.find(name); at != std::string::npos;
       at = device_name.find(name, at + 1))
    if (!(at > 0 && word(at - 1)) && !word(at + n)) return true;
  return false;
}

std::optional<GpuDatasheet> find_datasheet(const std::string& device_name) {
  std::optional<GpuDatasheet> best;
  for (const auto& d : gpu_datasheets()) {
    if (!names_row(device_name, d.name)) continue;
    if (!best || std::strlen(d.name) > std::strlen(best->name)) best = d;
  }
  return best;
}

double peak_tflops(const GpuDatasheet& d, Precision p) {
  double v = 0;
  switch (p) {
    case Precision::FP32:
      v = d.fp32_tflops;
      break;
    case Precision::TF32:
      v = d.tf32_tflops;
      break;
    case Precision::AMP_FP16:
      v = d.fp16_tflops;
      break;
    case Precision::AMP_BF16:
      v = d.bf16_tflops;
      break;
    case Precision::AMP_FP8:
      return d.fp8_tflops;  // no FP8 tensor cores: no rate (the mode does not run there)
  }
  return v > 0 ? v : d.fp32_tflops;
}

std::optional<std::string> native_cpu_unsupported_reason(Precision p, const DeviceInfo& info) {
  const char* name = precision_info(p).name;
  switch (p) {
    case Precision::FP32:
      return std::nullopt;
    case Precision::AMP_BF16: {
      if (!info.bf16_gemm.empty()) return std::nullopt;
      // A CPU with AVX-512 whose oneDNN is capped below it (--cpu-isa, ONEDNN_MAX_CPU_ISA): the
      // cap, not the CPU, leaves bf16 out.
      const bool capped =
          std::find(info.cpu_flags.begin(), info.cpu_flags.end(), "avx512") != info.cpu_flags.end();
      return fmt::format(
          "oneDNN {} has no bf16 kernel at {} ({}: bf16 needs AVX-512{}); --device reference "
          "emulates its numerics",
          info.onednn_version, capped ? "the ISA it is capped at" : "this CPU's ISA", info.cpu_isa,
          capped ? ", which this CPU has: --cpu-isa or ONEDNN_MAX_CPU_ISA capped it" : "");
    }
    default:
      return fmt::format(
          "{} has no native CPU path (oneDNN {} runs fp32 and bf16 only); --device reference "
          "emulates its numerics",
          name, info.onednn_version);
  }
}

std::optional<Ceilings> ceilings_for(const DeviceInfo& device, Precision p) {
  if (device.kind == "cpu") {
    const double peak = p == Precision::FP32       ? device.gemm_tflops_fp32
                        : p == Precision::AMP_BF16 ? device.gemm_tflops_bf16
                                                   : 0.0;
    if (peak > 0) return Ceilings{peak, 0};
    return std::nullopt;
  }
  if (device.kind != "cuda") return std::nullopt;
  const auto sheet = find_datasheet(device.name);
  if (!sheet) return std::nullopt;
  return Ceilings{peak_tflops(*sheet, p), sheet->memory_gbps};
}

bool has_tensor_cores(int cc_major, int cc_minor, Precision p) {
  switch (p) {
    case Precision::FP32:
      return false;
    case Precision::AMP_FP16:
      return cc_major >= 7;
    case Precision::AMP_FP8:
      return precision_supported(p, cc_major, cc_minor);
    default:
      return cc_major >= 8;
  }
}

std::optional<std::string> unsupported_reason(Precision p, Device device, const DeviceInfo& info) {
  if (info.kind == "cpu") return native_cpu_unsupported_reason(p, info);
  if (device != Device::CUDA || precision_supported(p, info.cc_major, info.cc_minor))
    return std::nullopt;
  const PrecisionInfo& pi = precision_info(p);
  return fmt::format("{} needs compute capability {}.{} or newer, {} is {}.{}", pi.name,
                     pi.min_cc_major, pi.min_cc_minor, info.name, info.cc_major, info.cc_minor);
}

}  // namespace mpbench
