// `mpbench devices`: what this machine offers, with the datasheet ceilings runs are measured
// against. Without a GPU it says why and still lists the CPU (exit 0: that is an answer).
#include <iostream>

#include "app/commands.h"
#include "app/console_table.h"
#include "app/output_file.h"
#include "train/device_specs.h"

namespace mpbench {

nlohmann::json gpu_facts_json(const DeviceInfo& d) {
  nlohmann::json j = {{"name", d.name},
                      {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                      {"memory_bytes", d.total_memory},
                      {"sm_count", d.sm_count},
                      {"driver_version", d.driver_version},
                      {"cuda_runtime_version", d.runtime_version},
                      {"cublas_version", d.cublas_version},
                      {"cudnn_version", d.cudnn_version}};
  auto sheet = find_datasheet(d.name);
  for (Precision p : all_precisions()) {
    nlohmann::json m = {{"tensor_cores", has_tensor_cores(d.cc_major, d.cc_minor, p)}};
    const double peak = sheet ? peak_tflops(*sheet, p) : 0;
    m["peak_tflops"] = peak > 0 ? nlohmann::json(peak) : nlohmann::json(nullptr);
    if (auto why = unsupported_reason(p, Device::CUDA, d)) m["unsupported"] = *why;
    j["modes"][precision_name(p)] = m;
  }
  j["memory_bandwidth_gbps"] = sheet ? nlohmann::json(sheet->memory_gbps) : nlohmann::json(nullptr);
  return j;
}

int cmd_devices(bool as_json) {
  DeviceInfo cpu = make_reference_backend()->info();
  std::string why;
  int n = cuda_device_count(&why);
  nlohmann::json j = {{"cpu", {{"name", cpu.name}, {"threads", cpu.cpu_threads}}},
                      {"cuda_devices", nlohmann::json::array()}};
  if (n == 0) j["no_cuda_reason"] = why;
  // The native CPU backend: its ISA and the GEMM ceilings it measures (a second or so).
  std::string why_cpu;
  if (native_cpu_available(&why_cpu)) {
    const DeviceInfo native = make_native_cpu_backend()->info();
    nlohmann::json nc = native_cpu_json(native);
    for (Precision p : all_precisions())
      if (auto why_not = unsupported_reason(p, Device::CPU, native))
        nc["unsupported"][precision_name(p)] = *why_not;
    j["native_cpu"] = nc;
  } else {
    j["native_cpu"] = nullptr;
    j["no_native_cpu_reason"] = why_cpu;
  }
  for (int i = 0; i < n; ++i)
    j["cuda_devices"].push_back(gpu_facts_json(make_cuda_backend(i)->info()));
  if (as_json) {
    nlohmann::json doc = json_header("devices");
    doc.update(j);
    std::cout << json_text(doc);
    return 0;
  }
  std::cout << fmt::format("CPU: {} ({} threads)\n", cpu.name, cpu.cpu_threads);
  if (j["native_cpu"].is_null()) {
    std::cout << "  native backend: none (" << why_cpu << ")\n";
  } else {
    const auto& nc = j["native_cpu"];
    std::string flags;
    bool amx = false;
    for (const auto& f : nc["cpu_flags"]) {
      flags += (flags.empty() ? "" : " ") + f.get<std::string>();
      amx = amx || f == "amx_bf16";
    }
    // As the JSON says it: AMX granted or not where the CPU has it, and how bf16 GEMMs run.
    std::cout << fmt::format(
        "  native backend: oneDNN {}, ISA {}, {} thread{} (one per physical core this process "
        "may run on), bf16 GEMMs {}\n  flags: {}{}\n",
        nc["onednn_version"].get<std::string>(), nc["isa"].get<std::string>(),
        nc["threads"].get<int>(), nc["threads"].get<int>() == 1 ? "" : "s",
        nc["bf16_gemm"].get<std::string>(), flags.empty() ? "none of avx2/avx512" : flags,
        nc["amx_granted"].get<bool>() ? "; AMX granted to this process"
        : amx                         ? "; AMX not granted to this process"
                                      : "");
    std::cout << fmt::format("  {:<10} {:>22}\n", "mode", "measured GEMM TFLOP/s");
    for (Precision p : all_precisions()) {
      const std::string name = precision_name(p);
      const bool unsupported = nc.contains("unsupported") && nc["unsupported"].contains(name);
      const auto& rate =
          nc["gemm_tflops"].contains(name) ? nc["gemm_tflops"][name] : nlohmann::json();
      // Why, as a run's row says it (a cap below bf16's ISA is not the CPU's doing).
      std::cout << fmt::format(
          "  {:<10} {:>22}{}\n", name,
          rate.is_number() ? fmt::format("{:.3f}", rate.get<double>()) : "-",
          unsupported ? "  (unsupported: " + nc["unsupported"][name].get<std::string>() + ")" : "");
    }
    if (const auto limit = native_bf16_limit(nc)) std::cout << "  " << *limit << "\n";
  }
  if (n == 0) std::cout << "GPU: none (" << why << ")\n";
  for (int i = 0; i < n; ++i) {
    const auto& d = j["cuda_devices"][i];
    std::cout << fmt::format(
        "GPU {}: {}, compute capability {}, {:.1f} GiB, {} SMs\n  driver {}, CUDA runtime {}, "
        "cuBLAS {}, cuDNN {}\n",
        i, d["name"].get<std::string>(), d["compute_capability"].get<std::string>(),
        d["memory_bytes"].get<double>() / (1 << 30), d["sm_count"].get<int>(),
        d["driver_version"].get<std::string>(), d["cuda_runtime_version"].get<std::string>(),
        d["cublas_version"].get<std::string>(), d["cudnn_version"].get<std::string>());
    std::cout << fmt::format("  {:<10} {:>12} {:>18}\n", "mode", "tensor cores",
                             "datasheet TFLOP/s");
    for (Precision p : all_precisions()) {
      const auto& m = d["modes"][precision_name(p)];
      std::cout << fmt::format(
          "  {:<10} {:>12} {:>18}{}\n", precision_name(p),
          m["tensor_cores"].get<bool>() ? "yes" : "no",
          m["peak_tflops"].is_null() ? std::string(m.contains("unsupported") ? "-" : "unknown")
                                     : fmt::format("{:.1f}", m["peak_tflops"].get<double>()),
          m.contains("unsupported") ? "  (unsupported: " + m["unsupported"].get<std::string>() + ")"
                                    : "");
    }
    if (!d["memory_bandwidth_gbps"].is_null())
      std::cout << fmt::format("  memory bandwidth (datasheet): {:.0f} GB/s\n",
                               d["memory_bandwidth_gbps"].get<double>());
  }
  return 0;
}

}  // namespace mpbench
