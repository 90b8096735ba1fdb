#pragma once
// Errors carry the exit code they map to, so that `main` can turn any failure into one line on
// stderr and the contract's exit code (2 bad input, 3 runtime failure).
#include <cstddef>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace mpbench {

enum class ErrorKind {
  BadInput = 2,     // arguments, spec, data files
  Runtime = 3,      // CUDA/cuBLAS/cuDNN failures, I/O errors while writing results
  OutOfMemory = 3,  // a mode that does not fit; the trainer turns it into an `oom` row
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& what, bool oom = false, size_t needed_bytes = 0)
      : std::runtime_error(what), kind_(kind), oom_(oom), needed_bytes_(needed_bytes) {}
  ErrorKind kind() const { return kind_; }
  int exit_code() const { return static_cast<int>(kind_); }
  bool is_oom() const { return oom_; }
  // An oom at a memory limit: the training memory in use plus the refused request, which the
  // run needed at least; 0 when unknown (the device itself refused).
  size_t needed_bytes() const { return needed_bytes_; }

 private:
  ErrorKind kind_;
  bool oom_;
  size_t needed_bytes_;
};

[[noreturn]] inline void throw_bad_input(const std::string& what) {
  throw Error(ErrorKind::BadInput, what);
}
[[noreturn]] inline void throw_runtime(const std::string& what) {
  throw Error(ErrorKind::Runtime, what);
}

}  // namespace mpbench

// Internal invariant / runtime check: throws mpbench::Error(Runtime) with the expression and
// file:line.
#define MPB_CHECK(cond, ...)                                                                     \
  do {                                                                                           \
    if (!(cond)) {                                                                               \
      ::mpbench::throw_runtime(::fmt::format("{}:{}: check `{}` failed: {}", __FILE__, __LINE__, \
                                             #cond, ::fmt::format(__VA_ARGS__)));                \
    }                                                                                            \
  } while (0)
