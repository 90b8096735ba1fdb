#pragma once
// Checked reading of the JSON files mpbench writes and reads back (result files, profile files):
// every getter names the JSON path of a field that is missing, of the wrong type or out of
// range, as Error(BadInput) "runs[0].epochs[2].time_ms: expected a number >= 0, got -1", so that
// `compare` and `report` refuse a damaged or hand-edited file in one line instead of printing
// nonsense. Non-finite numbers are written as null; where a field may be null it reads as NaN.
#include <cstdint>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace mpbench::json_check {

using nlohmann::json;

// The allowed values of a number: [lo, hi], and whether null (NaN) may stand for it.
struct Range {
  double lo = -std::numeric_limits<double>::infinity();
  double hi = std::numeric_limits<double>::infinity();
  bool null_ok = true;
};
inline constexpr Range kAny{};
inline constexpr Range kNonNegative{0, std::numeric_limits<double>::infinity(), true};
// Times in ms: a run's epoch and step times are measured, never missing, and under 1e12 ms (31
// years), which keeps their ratios and sums finite.
inline constexpr Range kTime{0, 1e12, false};
inline constexpr Range kFraction{0, 1, false};
inline constexpr Range kPositive{std::numeric_limits<double>::denorm_min(),
                                 std::numeric_limits<double>::max(), false};

std::string sub(const std::string& path, const char* key);  // "a.b" + "c" -> "a.b.c"
[[noreturn]] void bad(const std::string& path, const std::string& expected);

// nullptr when absent and not required.
const json* find(const json& obj, const char* key, const std::string& path, bool required);
const json& object_at(const json& obj, const char* key, const std::string& path);
// An array; absent: nullptr unless required.
const json* array_at(const json& obj, const char* key, const std::string& path, bool required);

// A number (or null -> NaN, where the range allows it) in range; absent: `def` unless required.
double number(const json& obj, const char* key, const std::string& path, Range r,
              bool required = false, double def = 0);
// The same for one element of an array, `path` naming it ("steps.loss[3]").
double number_value(const json& v, const std::string& path, Range r);
int64_t integer(const json& obj, const char* key, const std::string& path, int64_t lo,
                int64_t def = 0);
size_t byte_count(const json& obj, const char* key, const std::string& path);  // null: 0
bool boolean(const json& obj, const char* key, const std::string& path, bool def = false);
std::string string(const json& obj, const char* key, const std::string& path,
                   bool required = false);

// A spec's name (models/spec.h's rule: it reaches tables and file names as it is), required.
std::string model_name(const json& obj, const char* key, const std::string& path);

// For display (env, tool): a string as it is, a number or boolean as its JSON text, anything
// else, or a missing key or non-object, as "". Never throws.
std::string text(const json& obj, const char* key);

}  // namespace mpbench::json_check
