// The README's spec reference (section "## Spec") against the spec reader: every key the reader
// accepts has a row there, and every row names a key it accepts, for each "type" of a typed
// object (model, data, train.optimizer). What the reader accepts is asked of the reader itself:
// an unknown key's error lists the keys of that object's ObjectReader ("unknown key (expected one
// of: a, b)"), and a bad "type" lists the types ("expected one of \"x\", \"y\""), so nothing here
// repeats the reader's lists.
//
// The README's format, which this test reads: a table row "| `path` ... |" per key, the path from
// the top level with `[]` for a list's elements ("model.stages[].width"); a bold caption line
// ("**`model` with `\"type\": \"mlp\"`**") before a table names the types its rows belong to, and
// a row may name its own after the path ("`train.optimizer.beta1` (adam, adamw)"). A row with
// neither holds for every type of its object. A "<object>.type" row lists that object's types in
// backticks.
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "kernels/error.h"
#include "models/spec.h"
#include "test_util.h"

namespace mpbench {
namespace {

using json = nlohmann::json;

const char* kBogusKey = "zz_not_a_key";
const char* kBogusType = "zz_not_a_type";

// A valid model of each type; the reader's types without one here fail the test.
const std::map<std::string, json>& sample_models() {
  static const std::map<std::string, json> models = {
      {"mlp", json::parse(R"({"type": "mlp", "input_dim": 4, "hidden": [3], "num_classes": 2})")},
      {"resnet_bottleneck", json::parse(R"({"type": "resnet_bottleneck", "image_size": 16,
          "in_channels": 3, "stem": "imagenet", "num_classes": 2,
          "stages": [{"blocks": 1, "width": 4, "out_channels": 8}]})")},
      {"transformer", json::parse(R"({"type": "transformer", "d_model": 8, "heads": 2,
          "ffn_dim": 16, "seq_len": 4, "vocab_size": 8})")},
  };
  return models;
}

// The message of the BadInput that parsing `spec` throws ("" if it parses).
std::string error_of(const json& spec) {
  try {
    parse_spec(spec.dump(), "x.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The quoted names after "expected one of " in a bad "type"'s message.
std::set<std::string> types_in(const std::string& msg) {
  std::set<std::string> out;
  const size_t at = msg.find("expected one of ");
  const size_t end = msg.find(", got ", at);
  if (at == std::string::npos || end == std::string::npos) return out;
  const std::string list = msg.substr(at, end - at);
  static const std::regex quoted("\"([^\"]+)\"");
  for (std::sregex_iterator it(list.begin(), list.end(), quoted), e; it != e; ++it)
    out.insert((*it)[1]);
  return out;
}

std::string join(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// A path as the reader's messages write it: the probes take a list's first element.
std::string message_path(std::string path) {
  for (size_t at; (at = path.find("[]")) != std::string::npos;) path.replace(at, 2, "[0]");
  return path;
}

// The types the reader accepts for the typed object at `ptr` of a valid spec, at JSON path `path`.
std::set<std::string> reader_types(json spec, const json::json_pointer& ptr,
                                   const std::string& path) {
  spec[ptr]["type"] = kBogusType;
  const std::string msg = error_of(spec);
  EXPECT_NE(msg.find("x.json: " + message_path(path) + ".type: expected one of "),
            std::string::npos)
      << msg;
  return types_in(msg);
}

// What the reader accepts: (object path with [] for list elements, the type it holds or inherits,
// "" where none) -> keys.
using Accepted = std::map<std::pair<std::string, std::string>, std::set<std::string>>;

// Every object of a resolved spec (to_json writes every object the reader has), probed with an
// unknown key.
void probe(const json& spec, const json& node, const json::json_pointer& ptr,
           const std::string& path, std::string type, Accepted& accepted,
           std::map<std::string, std::set<std::string>>& types) {
  if (node.contains("type") && node["type"].is_string()) {
    type = node["type"].get<std::string>();
    const std::set<std::string> t = reader_types(spec, ptr, path);
    EXPECT_FALSE(t.empty()) << path;
    types[path].insert(t.begin(), t.end());
  }
  json bad = spec;
  bad[ptr][kBogusKey] = 1;
  const std::string msg = error_of(bad);
  const std::string head = fmt::format("x.json: {}: unknown key (expected one of: ",
                                       message_path(join(path, kBogusKey)));
  const size_t at = msg.find(head);
  EXPECT_NE(at, std::string::npos) << "spec: " << bad.dump() << "\nmessage: " << msg;
  if (at != std::string::npos) {
    const size_t from = at + head.size(), to = msg.rfind(')');
    std::stringstream list(msg.substr(from, to - from));
    for (std::string key; std::getline(list, key, ',');) {
      if (key.rfind(' ', 0) == 0) key.erase(0, 1);
      accepted[{path, type}].insert(key);
    }
  }
  for (const auto& [key, child] : node.items()) {
    if (child.is_object()) {
      probe(spec, child, ptr / key, join(path, key), type, accepted, types);
    } else if (child.is_array() && !child.empty() && child[0].is_object()) {
      probe(spec, child[0], ptr / key / 0, join(path, key) + "[]", type, accepted, types);
    }
  }
}

struct Row {
  std::string path;
  std::set<std::string> types;      // empty: every type of its object
  std::vector<std::string> ticked;  // the backticked words of the other cells
  int line = 0;
};

// The rows of README.md's "## Spec" section.
std::vector<Row> readme_rows() {
  const std::string file = test::source_dir() + "/README.md";
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << file;
  std::vector<Row> rows;
  bool in_section = false;
  std::set<std::string> context;
  static const std::regex type_re("\"type\": \"([a-z0-9_]+)\"");
  static const std::regex word_re("[a-z0-9_]+");
  static const std::regex tick_re("`\"?([^`\"]+)\"?`");
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    if (line.rfind("## ", 0) == 0) {
      in_section = line == "## Spec";
      continue;
    }
    if (!in_section) continue;
    if (line.rfind("**", 0) == 0) {  // a caption: the types of the rows below
      context.clear();
      for (std::sregex_iterator it(line.begin(), line.end(), type_re), e; it != e; ++it)
        context.insert((*it)[1]);
    } else if (line.rfind("| `", 0) == 0) {
      const size_t cell_end = line.find(" |", 2);
      const std::string cell = line.substr(2, cell_end - 2);
      const size_t close = cell.find('`', 1);
      Row row;
      row.path = cell.substr(1, close - 1);
      row.line = n;
      const std::string rest = cell.substr(close + 1);
      const size_t open = rest.find('(');
      if (open != std::string::npos) {
        const std::string names = rest.substr(open);
        for (std::sregex_iterator it(names.begin(), names.end(), word_re), e; it != e; ++it)
          row.types.insert(it->str());
      } else {
        row.types = context;
      }
      const std::string others = line.substr(cell_end);
      for (std::sregex_iterator it(others.begin(), others.end(), tick_re), e; it != e; ++it)
        row.ticked.push_back((*it)[1]);
      rows.push_back(row);
    }
  }
  return rows;
}

TEST(SpecReference, ReadmeListsExactlyTheKeysTheReaderAccepts) {
  // Model types from the reader, each with a sample; every data and optimizer type with each.
  const json base = json::parse(R"({"name": "t", "model": {"type": "mlp", "input_dim": 4,
      "hidden": [], "num_classes": 2}, "data": {}, "train": {"optimizer": {}}})");
  const std::set<std::string> model_types =
      reader_types(base, json::json_pointer("/model"), "model");
  json with_data_type = base, with_opt_type = base;
  with_data_type["data"]["type"] = "synthetic";
  with_opt_type["train"]["optimizer"]["type"] = "adam";
  const std::set<std::string> data_types =
      reader_types(with_data_type, json::json_pointer("/data"), "data");
  const std::set<std::string> opt_types =
      reader_types(with_opt_type, json::json_pointer("/train/optimizer"), "train.optimizer");
  ASSERT_FALSE(model_types.empty() || data_types.empty() || opt_types.empty());

  Accepted accepted;
  std::map<std::string, std::set<std::string>> types;  // typed object path -> its types
  std::set<std::string> parsed_model, parsed_data, parsed_opt;
  for (const std::string& m : model_types) {
    ASSERT_TRUE(sample_models().count(m))
        << "model.type \"" << m << "\" has no sample spec in this test: add one (and its keys to "
        << "README.md's Spec section)";
    for (const std::string& d : data_types) {
      for (const std::string& o : opt_types) {
        json spec = base;
        spec["model"] = sample_models().at(m);
        spec["data"] = {{"type", d}};
        // Files a non-synthetic type may need: paths only, which parsing does not open.
        for (const char* f : {"train_images", "train_labels", "eval_images", "eval_labels"})
          if (d != "synthetic") spec["data"][f] = "f";
        spec["train"]["optimizer"] = {{"type", o}};
        Spec s;
        try {
          s = parse_spec(spec.dump(), "x.json");
        } catch (const Error&) {
          continue;  // a combination the reader refuses (idx data for a transformer)
        }
        parsed_model.insert(m);
        parsed_data.insert(d);
        parsed_opt.insert(o);
        const json resolved = to_json(s);
        probe(resolved, resolved, json::json_pointer(), "", "", accepted, types);
      }
    }
  }
  EXPECT_EQ(parsed_model, model_types) << "a model type no sample spec parsed with";
  EXPECT_EQ(parsed_data, data_types) << "a data type no sample spec parsed with";
  EXPECT_EQ(parsed_opt, opt_types) << "an optimizer type no sample spec parsed with";
  ASSERT_FALSE(accepted.empty());

  const std::vector<Row> rows = readme_rows();
  ASSERT_GT(rows.size(), 20u) << "README.md's \"## Spec\" section has no key tables";

  // Every accepted key has a row for its type.
  for (const auto& [where, keys] : accepted) {
    const auto& [object, type] = where;
    for (const std::string& key : keys) {
      const std::string path = join(object, key);
      bool found = false;
      for (const Row& r : rows) found |= r.path == path && (r.types.empty() || r.types.count(type));
      EXPECT_TRUE(found) << "README.md's Spec section has no row for `" << path << "`"
                         << (type.empty() ? "" : " (type \"" + type + "\")")
                         << ", which the reader accepts";
    }
  }

  // Every row is an accepted key of each type it names (of every type of its object without).
  std::set<std::pair<std::string, std::string>> seen;
  for (const Row& r : rows) {
    const size_t dot = r.path.rfind('.');
    const std::string object = dot == std::string::npos ? "" : r.path.substr(0, dot);
    const std::string key = dot == std::string::npos ? r.path : r.path.substr(dot + 1);
    std::set<std::string> row_types = r.types;
    if (row_types.empty()) {
      for (const auto& [where, keys] : accepted)
        if (where.first == object) row_types.insert(where.second);
    }
    EXPECT_FALSE(row_types.empty()) << "README.md:" << r.line << ": `" << r.path
                                    << "`: the reader has no object \"" << object << "\"";
    for (const std::string& t : row_types) {
      const auto it = accepted.find({object, t});
      EXPECT_TRUE(it != accepted.end() && it->second.count(key))
          << "README.md:" << r.line << ": `" << r.path << "`"
          << (t.empty() ? "" : " (type \"" + t + "\")") << " is not a key the reader accepts";
      EXPECT_TRUE(seen.insert({r.path, t}).second)
          << "README.md:" << r.line << ": `" << r.path << "` documented twice";
    }
  }

  // Each typed object's "type" rows name every type the reader has.
  for (const auto& [object, names] : types) {
    std::set<std::string> documented;
    for (const Row& r : rows)
      if (r.path == join(object, "type")) documented.insert(r.ticked.begin(), r.ticked.end());
    for (const std::string& t : names)
      EXPECT_TRUE(documented.count(t)) << "README.md's `" << join(object, "type")
                                       << "` rows do not name the type \"" << t << "\"";
  }
}

// The probe itself: a misspelt key is refused with the list the test reads, and a typed object's
// keys depend on its type.
TEST(SpecReference, AMisspeltKeyIsRefusedWithTheAcceptedKeys) {
  const json spec = json::parse(R"({"name": "t", "model": {"type": "mlp", "input_dim": 4,
      "hidden": [], "num_classes": 2}, "train": {"optimizer": {"type": "sgd", "beta1": 0.9}}})");
  EXPECT_NE(error_of(spec).find("x.json: train.optimizer.beta1: unknown key (expected one of: "
                                "type, lr, weight_decay, momentum, nesterov)"),
            std::string::npos)
      << error_of(spec);
  json typo = spec;
  typo["train"]["optimizer"].erase("beta1");
  typo["model"]["hiden"] = typo["model"]["hidden"];
  EXPECT_NE(error_of(typo).find("x.json: model.hiden: unknown key (expected one of: type, "),
            std::string::npos)
      << error_of(typo);
}

}  // namespace
}  // namespace mpbench
