#include "models/spec_reader.h"

namespace mpbench::spec_json {

std::string render(const json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
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
