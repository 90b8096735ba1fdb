#pragma once
// How a spec file is read (models/spec.cpp says what it holds): every object through
// ObjectReader, which knows the file and the JSON path, rejects unknown keys before anything
// else (a typo is the likeliest mistake, and "unknown key hiddn" says more than "missing hidden")
// and formats every error the same way; DuplicateKeyCheck, a SAX pass, refuses a key given
// twice, which nlohmann would silently resolve to the last.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kernels/error.h"

namespace mpbench::spec_json {

using json = nlohmann::json;

// A value for a message: its JSON text, cut at 60 characters.
std::string render(const json& v);
// User text (a key, a name, an argument) quoted into a message: at most `max_bytes`, cut at a
// UTF-8 character boundary and marked "..." where cut, so that a 100 KB key is not echoed whole.
constexpr size_t kMaxQuoted = 200;
std::string clip(const std::string& s, size_t max_bytes = kMaxQuoted);
// A key of the file as a step of a message's path: clipped, and the empty key as "", which would
// otherwise vanish ("model." or the top level's "(top level)").
std::string key_text(const std::string& key);
// "a, b" or "\"a\", \"b\"".
std::string join_quoted(const std::vector<std::string>& names, bool quote);

struct Ctx {
  std::string file;
  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw_bad_input(fmt::format("{}: {}: {}", file, path.empty() ? "(top level)" : path, what));
  }
};

struct IntRange {
  int64_t lo, hi;
  std::string text() const {
    if (lo == 1) return fmt::format("a positive integer <= {}", hi);
    if (lo == 0) return fmt::format("a non-negative integer <= {}", hi);
    return fmt::format("an integer in [{}, {}]", lo, hi);
  }
};

// A number range with open or closed ends; text() is what the error message says is expected.
struct RealRange {
  double lo, hi;
  bool lo_open, hi_open;
  bool contains(double v) const {
    return std::isfinite(v) && (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
  }
  std::string text() const {
    const bool no_hi = std::isinf(hi);
    if (no_hi) return fmt::format("a finite number {} {}", lo_open ? ">" : ">=", lo);
    return fmt::format("a number in {}{}, {}{}", lo_open ? "(" : "[", lo, hi, hi_open ? ")" : "]");
  }
};
constexpr double kInf = std::numeric_limits<double>::infinity();

class ObjectReader {
 public:
  // `keys` is every key this object accepts, in the order the error message lists them.
  ObjectReader(const Ctx& ctx, const json& obj, std::string path, std::vector<std::string> keys)
      : ctx_(ctx), obj_(obj), path_(std::move(path)), keys_(std::move(keys)) {
    if (!obj_.is_object()) ctx_.fail(path_, "expected a JSON object, got " + render(obj_));
    for (const auto& [key, value] : obj_.items()) {
      if (std::find(keys_.begin(), keys_.end(), key) == keys_.end()) {
        ctx_.fail(sub(key_text(key)),
                  "unknown key (expected one of: " + join_quoted(keys_, false) + ")");
      }
    }
  }

  const Ctx& ctx() const { return ctx_; }
  const std::string& path() const { return path_; }
  std::string sub(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  bool has(const std::string& key) const { return obj_.contains(key); }

  // The value, or nullptr when absent; absence of a key without a default is an error.
  const json* find(const std::string& key, bool required, const std::string& expected) const {
    auto it = obj_.find(key);
    if (it == obj_.end()) {
      if (required) ctx_.fail(sub(key), "missing (expected " + expected + ")");
      return nullptr;
    }
    return &*it;
  }

  int64_t integer(const std::string& key, IntRange r, std::optional<int64_t> def) const {
    const json* v = find(key, !def, r.text());
    return v ? to_int(*v, sub(key), r) : *def;
  }
  int64_t integer_at(const json& v, const std::string& path, IntRange r) const {
    return to_int(v, path, r);
  }

  // A value the math uses in fp32 (learning rates, betas, the initial loss scale), checked as
  // that float and returned as written: a double, as PyTorch's Python floats, from which the
  // optimizers take their fp32 constants (1 - beta2 in double, then to fp32).
  double real(const std::string& key, RealRange r, double def) const {
    const double d = real64(key, r, def);
    // The range holds for the value as the trainer uses it: one that does not survive the trip
    // to float (1e-50, 1e50), or leaves the range on it (0.99999999 rounds to 1), is as wrong as
    // one out of range.
    const float f = static_cast<float>(d);
    if (!std::isfinite(f) || (d != 0 && f == 0) || !r.contains(static_cast<double>(f))) {
      ctx_.fail(sub(key), fmt::format("expected {}, got {}, which is {} as the 32-bit float it is "
                                      "used as",
                                      r.text(), render(*find(key, false, "")), f));
    }
    return d;
  }
  // A value used in double (the loss-scale factors, as GradScaler's Python floats).
  double real64(const std::string& key, RealRange r, double def) const {
    const json* v = find(key, false, r.text());
    if (!v) return def;
    if (!v->is_number()) ctx_.fail(sub(key), "expected " + r.text() + ", got " + render(*v));
    const double d = v->get<double>();
    if (!r.contains(d) || !std::isfinite(d)) {
      ctx_.fail(sub(key), "expected " + r.text() + ", got " + render(*v));
    }
    return d;
  }

  bool boolean(const std::string& key, bool def) const {
    const json* v = find(key, false, "true or false");
    if (!v) return def;
    if (!v->is_boolean()) ctx_.fail(sub(key), "expected true or false, got " + render(*v));
    return v->get<bool>();
  }

  std::string string(const std::string& key, std::optional<std::string> def) const {
    const json* v = find(key, !def, "a string");
    if (!v) return *def;
    if (!v->is_string()) ctx_.fail(sub(key), "expected a string, got " + render(*v));
    return v->get<std::string>();
  }

  // A file path: a non-empty string without NUL ("\u0000" would cut the path short at the
  // system call and open another file).
  std::string file_path(const std::string& key) const {
    const std::string p = string(key, std::nullopt);
    if (p.empty() || p.find('\0') != std::string::npos) {
      ctx_.fail(sub(key), "expected a file path (non-empty, without \\u0000), got " +
                              render(*find(key, false, "")));
    }
    return p;
  }

  // One of `names`; the message lists them.
  std::string choice(const std::string& key, const std::vector<std::string>& names,
                     std::optional<std::string> def) const {
    const std::string expected = "one of " + join_quoted(names, true);
    const json* v = find(key, !def, expected);
    if (!v) return *def;
    if (!v->is_string() ||
        std::find(names.begin(), names.end(), v->get<std::string>()) == names.end()) {
      ctx_.fail(sub(key), "expected " + expected + ", got " + render(*v));
    }
    return v->get<std::string>();
  }

  const json* array(const std::string& key, bool required, const std::string& expected) const {
    const json* v = find(key, required, expected);
    if (v && !v->is_array()) ctx_.fail(sub(key), "expected " + expected + ", got " + render(*v));
    return v;
  }

 private:
  int64_t to_int(const json& v, const std::string& path, IntRange r) const {
    // Only JSON integers: 784.0 or 1e3 is rejected, a float where a size belongs is a typo.
    const bool ok = (v.is_number_integer() && !v.is_number_unsigned() && v.get<int64_t>() >= r.lo &&
                     v.get<int64_t>() <= r.hi) ||
                    (v.is_number_unsigned() && v.get<uint64_t>() <= static_cast<uint64_t>(r.hi) &&
                     static_cast<int64_t>(v.get<uint64_t>()) >= r.lo);
    if (!ok) ctx_.fail(path, "expected " + r.text() + ", got " + render(v));
    return v.get<int64_t>();
  }

  const Ctx& ctx_;
  const json& obj_;
  std::string path_;
  std::vector<std::string> keys_;
};

// nlohmann keeps the last of duplicated keys silently; a spec with "lr" twice is a mistake. A SAX
// pass of its own over the text, before the parse: nlohmann's parser with a callback scans an
// array's elements each time one ends (for discarded ones), and a spec of a million objects in
// one array took 162 s to refuse.
struct DuplicateKeyCheck : nlohmann::json_sax<json> {
  struct Frame {
    std::string path;
    bool is_array;
    size_t index = 0;
    std::set<std::string> keys;
    std::string last_key;
  };
  explicit DuplicateKeyCheck(const Ctx* c) : ctx(c) {}
  const Ctx* ctx;
  std::vector<Frame> stack;

  // Runs the check over `text`; a syntax error stops it quietly (the parse reports it).
  static void run(const Ctx& ctx, const std::string& text) {
    DuplicateKeyCheck check(&ctx);
    json::sax_parse(text, &check);
  }

  std::string child_path() const { return path_below(stack.size()); }
  std::string path_below(size_t depth) const {
    if (depth == 0) return "";
    const Frame& f = stack[depth - 1];
    if (f.is_array) return fmt::format("{}[{}]", f.path, f.index);
    return f.path.empty() ? f.last_key : f.path + "." + f.last_key;
  }
  bool open(bool is_array) {
    // Specs nest four levels; the cap keeps absurd input from costing quadratic memory in the
    // paths kept here.
    if (stack.size() >= 32) ctx->fail(child_path(), "expected at most 32 levels of nesting");
    Frame f;
    f.path = child_path();
    f.is_array = is_array;
    stack.push_back(std::move(f));
    return true;
  }
  bool close() {
    stack.pop_back();
    return value();
  }
  bool value() {  // a child of the container on top is done
    if (!stack.empty() && stack.back().is_array) ++stack.back().index;
    return true;
  }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    Frame& f = stack.back();
    f.last_key = key_text(key);  // for paths in messages
    if (!f.keys.insert(key).second) ctx->fail(child_path(), "duplicate key");
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }
};

}  // namespace mpbench::spec_json
