#include "train/json_check.h"

#include <cmath>

#include <fmt/format.h>

#include "kernels/error.h"
#include "models/spec.h"

namespace mpbench::json_check {

namespace {

std::string range_text(Range r) {
  // Bounds that only keep a value finite or positive (DBL_MAX, FLT_MAX, the least denormal)
  // read better as words.
  std::string s = "a number";
  const bool tiny_lo = r.lo > 0 && r.lo < 1e-300;
  const bool lo = std::isfinite(r.lo) && !tiny_lo, hi = r.hi < 1e30;
  const bool float_hi = r.hi == static_cast<double>(std::numeric_limits<float>::max());
  if (lo && hi) {
    s += fmt::format(" in [{:g}, {:g}]", r.lo, r.hi);
  } else {
    if (tiny_lo) s += " > 0";
    if (lo) s += fmt::format(" >= {:g}", r.lo);
    if (hi) s += fmt::format("{} <= {:g}", tiny_lo || lo ? " and" : "", r.hi);
  }
  if (float_hi) s += " that fits a 32-bit float";
  return r.null_ok ? s + " or null" : s;
}

}  // namespace

std::string sub(const std::string& path, const char* key) {
  return path.empty() ? std::string(key) : path + "." + key;
}

void bad(const std::string& path, const std::string& expected) {
  throw_bad_input(fmt::format("{}: expected {}", path, expected));
}

const json* find(const json& obj, const char* key, const std::string& path, bool required) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    if (required) throw_bad_input(fmt::format("{}: missing", sub(path, key)));
    return nullptr;
  }
  return &*it;
}

const json& object_at(const json& obj, const char* key, const std::string& path) {
  const json* v = find(obj, key, path, true);
  if (!v->is_object()) bad(sub(path, key), "an object");
  return *v;
}

const json* array_at(const json& obj, const char* key, const std::string& path, bool required) {
  const json* v = find(obj, key, path, required);
  if (!v) return nullptr;
  if (!v->is_array()) bad(sub(path, key), "an array");
  return v;
}

double number_value(const json& v, const std::string& path, Range r) {
  if (v.is_null()) {
    if (!r.null_ok) bad(path, range_text(r) + ", got null");
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (!v.is_number()) bad(path, range_text(r));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < r.lo || d > r.hi)
    bad(path, fmt::format("{}, got {}", range_text(r), v.dump()));
  return d;
}

double number(const json& obj, const char* key, const std::string& path, Range r, bool required,
              double def) {
  const json* v = find(obj, key, path, required);
  return v ? number_value(*v, sub(path, key), r) : def;
}

std::string model_name(const json& obj, const char* key, const std::string& path) {
  const std::string name = string(obj, key, path, true);
  if (!valid_model_name(name)) bad(sub(path, key), fmt::format("a spec name ({})", kModelNameRule));
  return name;
}

int64_t integer(const json& obj, const char* key, const std::string& path, int64_t lo,
                int64_t def) {
  const json* v = find(obj, key, path, false);
  if (!v) return def;
  if (!v->is_number_integer() || (v->is_number_unsigned() && v->get<uint64_t>() > INT64_MAX))
    bad(sub(path, key), "an integer");
  const int64_t i = v->get<int64_t>();
  if (i < lo) bad(sub(path, key), fmt::format("an integer >= {}, got {}", lo, i));
  return i;
}

size_t byte_count(const json& obj, const char* key, const std::string& path) {
  const json* v = find(obj, key, path, false);
  if (!v || v->is_null()) return 0;
  if (!v->is_number_unsigned() && !(v->is_number_integer() && v->get<int64_t>() >= 0)) {
    bad(sub(path, key), "a byte count");
  }
  return v->get<size_t>();
}

bool boolean(const json& obj, const char* key, const std::string& path, bool def) {
  const json* v = find(obj, key, path, false);
  if (!v) return def;
  if (!v->is_boolean()) bad(sub(path, key), "true or false");
  return v->get<bool>();
}

std::string string(const json& obj, const char* key, const std::string& path, bool required) {
  const json* v = find(obj, key, path, required);
  if (!v) return "";
  if (!v->is_string()) bad(sub(path, key), "a string");
  return v->get<std::string>();
}

std::string text(const json& obj, const char* key) {
  if (!obj.is_object()) return "";
  auto it = obj.find(key);
  if (it == obj.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number() || it->is_boolean()) return it->dump();
  return "";
}

}  // namespace mpbench::json_check
