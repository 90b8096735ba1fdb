#pragma once
// The report formats besides the console table. Each returns the whole document as a string;
// callers write it with write_file_atomic so a failed run never leaves a partial file.
#include <string>

#include "train/results.h"

namespace mpbench {

// to_json(report), indented, with a trailing newline.
std::string format_json(const Report& report);

// A header and one row per run (model x precision), RFC 4180 quoting. Numbers that do not exist
// (no device samples, no fp32 baseline, a run that did not finish, non-finite values) are empty.
std::string format_csv(const Report& report);

// The console tables as GitHub tables, one section per model, under a one-line environment summary.
std::string format_markdown(const Report& report);

// "mpbench 0.1.0 (abc123) · cuda: NVIDIA H200, sm 9.0, 139.8 GiB · driver … · CUDA …" from the
// report's tool and env; parts that are absent are left out.
std::string env_summary(const Report& report);

// Quotes a CSV field when it holds a comma, quote, CR or LF (quotes doubled inside).
std::string csv_field(const std::string& s);

}  // namespace mpbench
