#include "models/spec_reader.h"

namespace mpbench::spec_json {

std::string render(const json& v) {
  const std::string s = v.dump();
  return s.size() > 60 ? clip(s, 57) : s;
}

std::string clip(const std::string& s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t end = max_bytes;
  // Back to the first byte of a UTF-8 sequence (at most 3 continuation bytes).
  for (int k = 0; k < 3 && end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80; ++k)
    --end;
  return s.substr(0, end) + "...";
}

std::string key_text(const std::string& key) {
  return key.empty() ? "\"\"" : clip(key);
}

std::string join_quoted(const std::vector<std::string>& names, bool quote) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += quote ? "\"" + names[i] + "\"" : names[i];
  }
  return out;
}

}  // namespace mpbench::spec_json
