// The mpbench executable on bad input: one line on stderr naming what and where, exit code 2;
// and the happy paths: run writes JSON/CSV/Markdown, validate and inspect answer.
#include <dlfcn.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/commands.h"
#include "kernels/backend.h"
#include "kernels/error.h"
#include "test_util.h"

namespace fs = std::filesystem;
using mpbench::test::count_lines;
using mpbench::test::has_text;
using mpbench::test::read_file;
using Result = mpbench::test::ShellResult;

namespace {

class Cli : public mpbench::test::CliTest {
 protected:
  std::string spec_file(const std::string& name, const std::string& text) {
    return write(name, text);
  }
  std::string tiny() const { return std::string(MPBENCH_SOURCE_DIR) + "/configs/tiny_mlp.json"; }
};

const char* kGood = R"({"name": "t", "model": {"type": "mlp", "input_dim": 16, "hidden": [8],
  "num_classes": 4}, "data": {"train_samples": 256, "eval_samples": 64},
  "train": {"batch_size": 32, "epochs": 1}})";

// A 1x1-image resnet at batch 1: its batchnorms would see one value per channel.
const char* kTinyImages = R"({"name": "r", "model": {"type": "resnet_bottleneck",
  "image_size": 1, "in_channels": 4, "width": 4, "out_channels": 8, "blocks": 1,
  "num_classes": 2}, "data": {"train_samples": 4, "eval_samples": 2},
  "train": {"batch_size": 1, "epochs": 1}})";

// 2x2 images: their 2x2 motif has 4! = 24 arrangements, one per class at most.
const char* kManyClasses = R"({"name": "r", "model": {"type": "resnet_bottleneck",
  "image_size": 2, "in_channels": 4, "width": 4, "out_channels": 8, "blocks": 1,
  "num_classes": 25}, "data": {"train_samples": 4, "eval_samples": 2},
  "train": {"batch_size": 1, "epochs": 1}})";

// Valid at batch 2 (2 x 1x1 values per channel after the stride), not at 1.
const char* kTwoByTwo = R"({"name": "r", "model": {"type": "resnet_bottleneck",
  "image_size": 2, "in_channels": 4, "width": 4, "out_channels": 8, "blocks": 1, "stride": 2,
  "num_classes": 2}, "data": {"train_samples": 4, "eval_samples": 2},
  "train": {"batch_size": 2, "epochs": 1}})";

// 128 classes x 4 sub-clusters x 2^20 inputs: 2^29 prototype floats for the synthetic data,
// over its 2^28; every other limit holds.
const char* kPrototypes = R"({"name": "p", "model": {"type": "mlp", "input_dim": 1048576,
  "hidden": [], "num_classes": 128}, "data": {"train_samples": 128, "eval_samples": 1},
  "train": {"batch_size": 128, "epochs": 1}})";

std::string with(const std::string& from, const std::string& to) {
  std::string s = kGood;
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

struct BadCase {
  std::string name;
  std::string args;      // {spec} is replaced by a file holding `spec`
  std::string spec;      // empty: none written
  std::string fragment;  // must appear in stderr
};

}  // namespace

TEST_F(Cli, BadInputIsOneLineAndExitTwo) {
  const std::string no_dir = (dir_ / "missing" / "x.json").string();
  const std::string same = (dir_ / "same.out").string(), fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);  // no writer: reading it would block forever
  std::vector<BadCase> cases = {
      {"empty --json", "run {spec} --json ''", kGood, "--json: expected a value, got ''"},
      // In the order given (CLI11 said "cpu --device 1 --epochs"), the options named.
      {"another command's options", "inspect {spec} --epochs 1 --device cpu", kGood,
       "unexpected arguments: --epochs 1 --device cpu (inspect has no --epochs, --device) (see "
       "mpbench inspect --help)"},
      {"unknown size unit", "run {spec} --memory-limit 16XB", kGood, "--memory-limit"},
      {"zero size", "run {spec} --memory-limit 0", kGood,
       "--memory-limit: expected a size above 0 bytes, got '0'"},
      {"fractional bytes", "profile {spec} --memory-limit 1.5", kGood, "--memory-limit"},
      {"negative size", "run {spec} --memory-limit -3GiB", kGood, "--memory-limit"},
      {"maxbatch size unit", "maxbatch {spec} --memory-limit 2PB", kGood, "--memory-limit"},
      {"zero in a sweep", "run {spec} --batch-sizes 32,0", kGood, "--batch-sizes: expected"},
      {"sweep twice a batch", "run {spec} --batch-sizes 32,32", kGood, "given twice"},
      {"sweep not a number", "run {spec} --batch-sizes 32,x", kGood, "'x'"},
      {"sweep and batch size", "run {spec} --batch-sizes 32 --batch-size 64", kGood,
       "--batch-size"},
      {"sweep batch over the data", "run {spec} --batch-sizes 32,5000", kGood,
       "--batch-sizes 5000: "},
      // Seven digits are a batch size (up to 2^20) the spec's rules then judge.
      {"sweep batch of seven digits", "run {spec} --batch-sizes 1000000", kGood,
       "--batch-sizes 1000000: "},
      {"repeat 0", "run {spec} --repeat 0", kGood, "--repeat: Value 0 not in range 1 to 1000"},
      {"threads on the reference", "run {spec} --device reference --threads 2", kGood,
       "--threads: only --device cpu (or auto on a machine without a GPU) takes it"},
      // Plain decimals only: strtod would take hex and exponents, strtoll octal.
      {"hex number", "run {spec} --bucket-mb 0x10", kGood,
       "--bucket-mb: expected a decimal number, got '0x10'"},
      {"exponent", "run {spec} --bucket-mb 1e1", kGood,
       "--bucket-mb: expected a decimal number, got '1e1'"},
      {"leading zero", "run {spec} --epochs 01", kGood,
       "--epochs: expected a decimal integer, got '01'"},
      {"leading zero in a size", "run {spec} --memory-limit 05GiB", kGood, "got '05GiB'"},
      {"maxbatch multiple 0", "maxbatch {spec} --multiple 0", kGood, "--multiple"},
      {"maxbatch without spec", "maxbatch", "", "specs"},
      {"maxbatch output is the spec", "maxbatch {spec} --csv {spec}", kGood, "is the input"},
      {"maxbatch bad precision", "maxbatch {spec} --precisions fp33", kGood, "fp33"},
      // One file under two names (the test runs in the spec's folder) counts once, or is refused.
      {"maxbatch a spec twice", "maxbatch {spec} $(dirname {spec})/./spec.json", kGood,
       "both name their model"},
      {"a baseline twice",
       "compare --baseline {spec} --baseline $(dirname {spec})/./spec.json {spec}", kGood,
       "/./spec.json is given twice (as "},
      {"a report input twice", "report {spec} $(dirname {spec})/./spec.json --html /dev/null",
       kGood, "/./spec.json is given twice (as "},
      {"empty --md", "profile {spec} --json ''", kGood, "--json"},
      {"empty --precisions", "run {spec} --precisions ''", kGood, "--precisions"},
      {"empty spec path", "validate ''", "", "spec"},
      {"two outputs on one file", "run {spec} --json " + same + " --csv " + same, kGood,
       "--csv " + same + ": the same file as --json"},
      {"output is the spec", "run {spec} --md {spec}", kGood, "is the input"},
      {"fifo spec", "validate " + fifo, "", "is a FIFO, expected a regular file"},
      {"directory spec", "validate " + dir_.string(), "", "is a directory"},
      {"newline in a key", "validate {spec}", with("\"train\"", "\"tr\\nain\""),
       "spec.json: tr\\nain: unknown key"},
      {"binary spec", "validate {spec}", std::string("\x01\xff\xfe{\x7f", 5), "JSON"},
      {"no subcommand", "", "", "subcommand"},
      {"unknown subcommand", "frobnicate", "", "frobnicate"},
      {"run without spec", "run", "", "spec"},
      {"unknown flag", "run {spec} --frob", kGood, "--frob"},
      {"missing spec file", "run /nonexistent/spec.json", "", "/nonexistent/spec.json"},
      {"bad device", "run {spec} --device tpu", kGood, "--device"},
      {"unknown precision flag", "run {spec} --precisions fp32,fp8", kGood, "fp8"},
      {"empty item in a list", "run {spec} --precisions ,fp32", kGood,
       "--precisions: ',fp32' has an empty item"},
      {"empty item in a sweep", "run {spec} --batch-sizes 8,,16", kGood,
       "--batch-sizes: '8,,16' has an empty item"},
      {"duplicate precision flag", "run {spec} --precisions fp32,fp32", kGood,
       "--precisions fp32,fp32: "},
      {"zero epochs", "run {spec} --epochs 0", kGood, "--epochs"},
      {"epochs not a number", "run {spec} --epochs abc", kGood, "--epochs"},
      {"batch too large for data", "run {spec} --batch-size 5000", kGood, "--batch-size"},
      {"negative seed", "run {spec} --seed -4", kGood, "--seed"},
      {"json into missing dir", "run {spec} --json " + no_dir, kGood, no_dir},
      {"csv into missing dir", "run {spec} --csv " + no_dir, kGood, no_dir},
      {"syntax error", "run {spec}", "{\"name\": \"t\",\n \"model\": {,}}", ":2:"},
      {"empty file", "validate {spec}", " ", "JSON"},
      {"not an object", "validate {spec}", "[1, 2]", "object"},
      {"unknown top key", "validate {spec}", with("\"train\"", "\"trian\""), "trian"},
      {"unknown model key", "validate {spec}", with("\"hidden\"", "\"hiddn\""), "model.hiddn"},
      {"negative hidden", "validate {spec}", with("[8]", "[8, -3]"), "model.hidden[1]"},
      {"float size", "validate {spec}", with("\"input_dim\": 16", "\"input_dim\": 16.5"),
       "model.input_dim"},
      {"string size", "validate {spec}", with("\"num_classes\": 4", "\"num_classes\": \"4\""),
       "model.num_classes"},
      {"unknown family", "validate {spec}", with("\"mlp\"", "\"rnn\""), "model.type"},
      {"unknown activation", "validate {spec}",
       with("\"hidden\": [8]", "\"hidden\": [8], \"activation\": \"tanh\""), "model.activation"},
      {"unknown precision", "validate {spec}",
       with("\"name\": \"t\"", "\"name\": \"t\", \"precisions\": [\"fp8\"]"), "precisions[0]"},
      {"empty precisions", "validate {spec}",
       with("\"name\": \"t\"", "\"name\": \"t\", \"precisions\": []"), "precisions"},
      {"unknown optimizer", "validate {spec}",
       with("\"epochs\": 1", "\"epochs\": 1, \"optimizer\": {\"type\": \"lion\"}"),
       "train.optimizer.type"},
      {"bad growth factor", "validate {spec}",
       with("\"name\": \"t\"", "\"name\": \"t\", \"loss_scale\": {\"growth_factor\": 0.5}"),
       "loss_scale.growth_factor"},
      {"bad fp32 layer", "validate {spec}",
       with("\"name\": \"t\"", "\"name\": \"t\", \"fp32_layers\": [\"fc9\"]"), "fp32_layers[0]"},
      {"batch larger than data", "validate {spec}",
       with("\"batch_size\": 32", "\"batch_size\": 999"), "batch_size"},
      {"idx without files", "validate {spec}",
       with("\"train_samples\": 256", "\"type\": \"idx\", \"train_samples\": 256"), "data"},
      // inspect checks the data files as every command does; the line names the spec and key.
      {"inspect of idx files that are not there", "inspect {spec}",
       with("\"train_samples\": 256",
            "\"type\": \"idx\", \"train_images\": \"a\", \"train_labels\": \"b\", "
            "\"eval_images\": \"c\", \"eval_labels\": \"d\", \"train_samples\": 256"),
       "spec.json: data.train_images: "},
      {"inspect bad precision", "inspect {spec} --precision fp64", kGood, "fp64"},
      {"inspect bad depth", "inspect {spec} --depth op", kGood, "--depth"},
      {"inspect json into missing dir", "inspect {spec} --json " + no_dir, kGood, no_dir},
      {"cuda without a gpu", "run {spec} --device cuda", kGood, "--device cuda"},
      {"resnet batchnorm over one value", "validate {spec}", kTinyImages, "train.batch_size"},
      {"resnet more classes than arrangements", "validate {spec}", kManyClasses,
       "model.num_classes"},
      {"batchnorm over one value after --batch-size", "run {spec} --batch-size 1", kTwoByTwo,
       "--batch-size 1"},
      {"profile zero steps", "profile {spec} --steps 0", kGood, "--steps"},
      {"profile unknown precision", "profile {spec} --precision fp8", kGood, "fp8"},
      {"profile json into missing dir", "profile {spec} --json " + no_dir, kGood, no_dir},
      {"profile two specs", "profile {spec} {spec}", kGood, "spec"},
      {"explain one mode", "explain {spec} --precisions fp32", kGood, "--precisions"},
      {"explain no rounds", "explain {spec} --repeat 0", kGood, "--repeat"},
      {"one seed", "run {spec} --seeds 1", kGood, "--seeds"},
      {"explain unknown mode", "explain {spec} --precisions fp32,fp8", kGood, "fp8"},
      // Issue 25 class 7: what run refuses, validate refuses, in the same words.
      {"validate prototype cap", "validate {spec}", kPrototypes,
       "spec.json: model: expected model.num_classes x 4 sub-clusters x model.input_dim at most "
       "268435456 prototype values"},
      {"run prototype cap", "run {spec} --device reference", kPrototypes,
       "spec.json: model: expected model.num_classes x 4 sub-clusters"},
      {"beta1 that rounds to 1", "validate {spec}",
       with("\"epochs\": 1", "\"epochs\": 1, \"optimizer\": {\"beta1\": 0.99999999}"),
       "spec.json: train.optimizer.beta1: expected a number in [0, 1), got 0.99999999"},
      {"beta2 that rounds to 1", "validate {spec}",
       with("\"epochs\": 1", "\"epochs\": 1, \"optimizer\": {\"beta2\": 0.99999999}"),
       "spec.json: train.optimizer.beta2: expected a number in [0, 1)"},
      {"momentum that rounds to 1", "validate {spec}",
       with("\"epochs\": 1",
            "\"epochs\": 1, \"optimizer\": {\"type\": \"sgd\", \"momentum\": 0.99999999}"),
       "spec.json: train.optimizer.momentum: expected a number in [0, 1)"},
      {"NUL then a second value", "validate {spec}",
       std::string(kGood) + std::string("\0{\"name\": \"u\"}", 15),
       "spec.json:3:44: JSON syntax error: bytes after the JSON value"},
      {"trailing word", "run {spec}", std::string(kGood) + " x",
       "spec.json:3:45: JSON syntax error"},
      {"NUL in an idx path", "validate {spec}",
       with("\"train_samples\": 256",
            "\"type\": \"idx\", \"train_images\": \"a.idx\\u0000/etc/passwd\", "
            "\"train_labels\": \"b\", \"eval_images\": \"c\", \"eval_labels\": \"d\", "
            "\"train_samples\": 256"),
       "spec.json: data.train_images: expected a file path (non-empty, without \\u0000)"},
      {"blank inside a mode", "run {spec} --precisions 'f p 3 2'", kGood,
       "--precisions: 'f p 3 2' has a blank inside"},
      {"blank inside a profile mode", "profile {spec} --precisions 'fp32, amp bf16'", kGood,
       "--precisions: 'amp bf16' has a blank inside"},
      {"blank inside a maxbatch mode", "maxbatch {spec} --precisions 'f p32'", kGood,
       "--precisions: 'f p32'"},
      {"blank inside a batch size", "run {spec} --batch-sizes '3 2'", kGood, "--batch-sizes"},
      {"fraction of a byte", "run {spec} --memory-limit 1.5B", kGood,
       "--memory-limit: expected a size such as 16GiB, 512MiB, 4GB or a number of bytes (whole "
       "bytes), got '1.5B'"},
      {"fraction of a byte in KiB", "maxbatch {spec} --memory-limit 0.0001KiB", kGood,
       "--memory-limit"},
      {"hex epochs", "run {spec} --epochs 0x2", kGood,
       "--epochs: expected a decimal integer, got '0x2'"},
      {"octal-looking epochs", "run {spec} --epochs 010", kGood, "--epochs"},
      // Before the range: "Value abc not in range 1 to 10000" said nothing of what was wrong.
      {"a word for epochs", "run {spec} --epochs abc", kGood,
       "--epochs: expected a decimal integer, got 'abc'"},
      {"a fraction for epochs", "run {spec} --epochs 1.5", kGood,
       "--epochs: expected a decimal integer, got '1.5'"},
      // A fractional bound read "0.000977 to 65536.000000".
      {"a bucket of 0 MiB", "run {spec} --bucket-mb 0", kGood,
       "--bucket-mb: Value 0 not in range 1/1024 (1 KiB) to 65536"},
      {"an option given twice", "run {spec} --threads 1 --threads 2", kGood,
       "--threads: given more than once; give it once"},
      // The next option is not taken as an output's file: it wrote a file named "--quiet", and
      // compare's --strict was lost.
      {"an option after --json", "run {spec} --json --quiet", kGood,
       "--json: expected a value, got the option '--quiet' (a file of that name: ./--quiet)"},
      {"--strict after compare's --json", "compare {spec} {spec} --json --strict", kGood,
       "--json: expected a value, got the option '--strict'"},
      {"a short option after --out=", "data {spec} --out= -q", kGood,
       "--out: expected a value, got the option '-q'"},
      {"an option for the modes", "run {spec} --precisions --quiet", kGood,
       "--precisions: expected a value, got the option '--quiet'"},
      {"hex batch size", "run {spec} --batch-size 0x20", kGood, "--batch-size"},
      {"hex seed", "run {spec} --seed 0x10", kGood, "--seed"},
      {"hex seeds", "run {spec} --seeds 0x2", kGood, "--seeds"},
      {"hex repeat", "run {spec} --repeat 0x2", kGood, "--repeat"},
      {"plus-signed epochs", "run {spec} --epochs +2", kGood, "--epochs"},
      {"blank-led epochs", "run {spec} --epochs ' 2'", kGood, "--epochs"},
      {"hex profile steps", "profile {spec} --steps 0x3", kGood, "--steps"},
      {"hex profile top", "profile {spec} --top 0x3", kGood, "--top"},
      {"hex explain batch", "explain {spec} --batch-size 0x8", kGood, "--batch-size"},
      {"hex maxbatch multiple", "maxbatch {spec} --multiple 0x8", kGood, "--multiple"},
      {"hex maxbatch steps", "maxbatch {spec} --steps 0x2", kGood, "--steps"},
      {"hex data seed", "data {spec} --out x --seed 0x1", kGood, "--seed"},
      {"octal-looking sweep", "run {spec} --batch-sizes 032,64", kGood, "--batch-sizes"},
      {"octal-looking size", "run {spec} --memory-limit 010GiB", kGood, "--memory-limit"},
      {"hex time threshold", "compare {spec} {spec} --time-threshold 0x10", kGood,
       "--time-threshold: expected a non-negative decimal percentage"},
      {"hex percent threshold", "compare {spec} {spec} --memory-threshold 0x1%", kGood,
       "--memory-threshold"},
      {"infinite threshold", "compare {spec} {spec} --accuracy-threshold inf", kGood,
       "--accuracy-threshold"},
      {"exponent threshold", "compare {spec} {spec} --loss-threshold 1e1", kGood,
       "--loss-threshold"},
      // Issue 25 class 8: no code point that breaks the line or reverses how it displays reaches
      // the terminal (the check below holds every message to printable ASCII).
      {"bidi override in a key", "validate {spec}", with("\"train\"", "\"tr\u202Eain\""),
       "spec.json: tr\\u{202E}ain: unknown key"},
      {"line separator in a key", "validate {spec}", with("\"train\"", "\"tr\u2028ain\""),
       "tr\\u{2028}ain: unknown key"},
      {"paragraph separator in a key", "validate {spec}", with("\"train\"", "\"tr\u2029ain\""),
       "tr\\u{2029}ain"},
      {"zero-width space in a key", "validate {spec}", with("\"train\"", "\"tr\u200Bain\""),
       "tr\\u{200B}ain"},
      {"BOM in a key", "validate {spec}", with("\"train\"", "\"\uFEFFtrain\""),
       "spec.json: \\u{FEFF}train: unknown key"},
      {"unassigned code point in a key", "validate {spec}", with("\"train\"", "\"tr\\u0378ain\""),
       "tr\\u{0378}ain"},
      {"bidi override in an argument", "frobnicate\xe2\x80\xae", "", "frobnicate\\u{202E}"},
      {"unknown option before a subcommand", "--versionx", "", "unknown option '--versionx'"},
      {"unknown short option before a subcommand", "-x run", "", "unknown option '-x'"},
      // Each option's range at the value past its end (each was taken unchecked, or went on to
      // do nothing: --multiple without --memory-limit, 0 threads).
      {"inspect multiple without a limit", "inspect {spec} --multiple 8", kGood,
       "--multiple requires --memory-limit"},
      {"a bucket under 1 KiB", "run {spec} --bucket-mb 0.0009", kGood,
       "--bucket-mb: Value 0.0009 not in range 1/1024 (1 KiB) to 65536"},
      {"zero threads", "run {spec} --threads 0", kGood,
       "--threads: Value 0 not in range 1 to 4096"},
      {"maxbatch multiple past 2^20", "maxbatch {spec} --multiple 1048577", kGood,
       "--multiple: Value 1048577 not in range 1 to 1048576"},
      {"profile no top rows", "profile {spec} --top 0", kGood,
       "--top: Value 0 not in range 1 to 100000"},
      {"explain over 100 rounds", "explain {spec} --repeat 101", kGood,
       "--repeat: Value 101 not in range 1 to 100"},
      // --md names a file as --json does: '-q' is the option, not a file of that name.
      {"a short option after --md", "run {spec} --md -q", kGood,
       "--md: expected a value, got the option '-q' (a file of that name: ./-q)"},
      {"a short option after --html", "report {spec} --html -q", kGood,
       "--html: expected a value, got the option '-q'"},
      {"a short option after --junit", "compare {spec} {spec} --junit -q", kGood,
       "--junit: expected a value, got the option '-q'"},
      {"a short option after --baseline", "compare {spec} --baseline -q", kGood,
       "--baseline: expected a value, got the option '-q'"},
      {"a short option after --scaling-baseline", "run {spec} --scaling-baseline -q", kGood,
       "--scaling-baseline: expected a value, got the option '-q'"},
  };
  for (const auto& c : cases) {
    std::string args = c.args;
    if (!c.spec.empty()) {
      const std::string path = spec_file("spec.json", c.spec);
      for (auto pos = args.find("{spec}"); pos != std::string::npos; pos = args.find("{spec}"))
        args.replace(pos, 6, path);
    }
    Result r = run(args);
    EXPECT_EQ(r.code, 2) << c.name << ": " << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos)
        << c.name << ": expected '" << c.fragment << "' in: " << r.err;
    // One line: a single newline at the end, and printable (the fragments are ASCII).
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << c.name << ": " << r.err;
    EXPECT_TRUE(std::all_of(r.err.begin(), r.err.end() - 1,
                            [](char ch) { return ch >= 0x20 && ch < 0x7f; }))
        << c.name << ": " << r.err;
    EXPECT_FALSE(fs::exists(no_dir)) << c.name;
  }
}

// Result files: bytes after the JSON value are refused naming the file, by compare and report
// alike (a NUL would otherwise end the input for the parser).
TEST_F(Cli, TrailingBytesInResultFilesAreRefused) {
  const std::string good =
      read_file(std::string(MPBENCH_SOURCE_DIR) + "/results/baseline-cpu.json");
  ASSERT_FALSE(good.empty());
  const std::string base = write("base.json", good);
  for (const std::string& tail :
       {std::string("\0{}", 3), std::string("\n\0", 2), std::string(" x"), std::string(" {}")}) {
    const std::string bad = write("bad.json", good + tail);
    for (const std::string& args : {"compare " + base + " " + bad, "compare " + bad + " " + base,
                                    "report " + bad + " --html " + (dir_ / "r.html").string()}) {
      SCOPED_TRACE(args);
      Result r = run(args);
      EXPECT_EQ(r.code, 2) << r.err;
      EXPECT_NE(r.err.find("bad.json:"), std::string::npos) << r.err;
      EXPECT_NE(r.err.find("JSON syntax error"), std::string::npos) << r.err;
      EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    }
  }
  EXPECT_FALSE(fs::exists(dir_ / "r.html"));
}

// validate refuses two specs of one name, as run does: it applies every rule run applies before
// training.
TEST_F(Cli, ValidateRefusesTwoSpecsOfOneName) {
  Result r = run("validate " + tiny() + " " + tiny());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("the same file twice"), std::string::npos) << r.err;
  const std::string copy = (dir_ / "copy.json").string();
  fs::copy_file(tiny(), copy);
  r = run("validate " + tiny() + " " + copy);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find(copy + " both name"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

// Numbers are plain decimal in every option, and still taken as such.
TEST_F(Cli, DecimalNumbersAreStillTaken) {
  Result r =
      run("run " + tiny() + " --device reference --quiet --epochs 1 --precisions ' fp32 , tf32 '" +
          " --seed 0 --memory-limit 0.5GiB --batch-size 64");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("tf32"), std::string::npos) << r.out;
  // --bucket-mb's upper end is in range (a warning: no launch here).
  r = run("run " + tiny() + " --device reference --quiet --epochs 1 --precisions fp32 " +
          "--bucket-mb 65536");
  EXPECT_EQ(r.code, 0) << r.err;
  r = run("run " + tiny() + " --device reference --quiet --epochs -1");
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("--epochs"), std::string::npos) << r.err;
}

// User text is echoed cut: a 100 KB unknown key, or a 50 KB argument, gives a line of at most a
// few hundred bytes (spec messages) or about 2000 (the cap on every line).
TEST_F(Cli, UserTextIsEchoedCut) {
  const std::string key(100000, 'k');
  const std::string spec = write("spec.json", with("\"train\"", "\"" + key + "\""));
  Result r = run("validate " + spec);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.err.find("spec.json: kkkk"), std::string::npos) << r.err.substr(0, 300);
  EXPECT_NE(r.err.find("k...: unknown key"), std::string::npos) << r.err.substr(0, 300);
  EXPECT_LT(r.err.size(), 600u);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1);
  for (const std::string& args :
       {"run " + spec + " --frob" + std::string(50000, 'x'), std::string(50000, 'y'),
        "run " + tiny() + " --device " + std::string(50000, 'z'),
        "run " + tiny() + " --precisions " + std::string(50000, 'p'),
        "run " + tiny() + " --memory-limit " + std::string(50000, '9') + "GiB"}) {
    SCOPED_TRACE(args.substr(0, 40));
    Result c = run(args);
    EXPECT_EQ(c.code, 2) << c.err.substr(0, 300);
    EXPECT_LT(c.err.size(), 2200u);
    EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1);
  }
}

// printable_line, the one place where messages become one line: controls, line and paragraph
// separators, bidi controls, zero-width characters, BOMs, private-use and unassigned code points
// are written \u{XXXX}; letters of any script and emoji stay; bytes that are not UTF-8 are \xNN;
// a line past 2000 bytes is cut, saying so.
TEST(PrintableLine, EscapesWhatBreaksOrHidesTheLine) {
  using mpbench::printable_line;
  const std::pair<std::string, std::string> cases[] = {
      {"a\nb\tc\rd\x01\x7f", "a\\nb\\tc\\rd\\x01\\x7f"},
      {"a\u2028b\u2029c", "a\\u{2028}b\\u{2029}c"},
      {"x\u202Ey\u202Dz\u2066w\u2069\u200E\u200F\u061C",
       "x\\u{202E}y\\u{202D}z\\u{2066}w\\u{2069}\\u{200E}\\u{200F}\\u{061C}"},
      {"\u200B\u200C\u200D\u2060\u00AD", "\\u{200B}\\u{200C}\\u{200D}\\u{2060}\\u{00AD}"},
      {"\uFEFFbom", "\\u{FEFF}bom"},
      {"\u0085\u009F", "\\u{0085}\\u{009F}"},  // C1 controls
      {"\u0378\uFFFE\U0001FFFF\U00050000", "\\u{0378}\\u{FFFE}\\u{1FFFF}\\u{50000}"},  // unassigned
      {"\uE000\U0010FFFF\U000E0001", "\\u{E000}\\u{10FFFF}\\u{E0001}"},  // private use, tag
      {"caf\u00e9 \u4e2d\u6587 \U0001F600 \u00A0",
       "caf\u00e9 \u4e2d\u6587 \U0001F600 \u00A0"},                               // kept
      {"\xff\xc3(\xed\xa0\x80\xc0\xaf", "\\xff\\xc3(\\xed\\xa0\\x80\\xc0\\xaf"},  // not UTF-8
  };
  for (const auto& [in, want] : cases) EXPECT_EQ(printable_line(in), want) << want;
  // A line of many words is cut at 2000 bytes, its note included.
  std::string words;
  for (int i = 0; i < 20000; ++i) words += "word ";
  const std::string long_line = printable_line(words);
  EXPECT_LE(long_line.size(), 2000u);
  EXPECT_NE(long_line.find("... (cut: 1936 of 100000 bytes shown)"), std::string::npos)
      << long_line.substr(1900);
  // One word (an argument, a path) is echoed in its first 200 bytes.
  EXPECT_EQ(printable_line(std::string(100000, 'a')), std::string(200, 'a') + "...");
  // Escapes count against the cap as written: 100000 newlines are cut as early.
  EXPECT_LT(printable_line(std::string(100000, '\n')).size(), 2100u);
}

TEST_F(Cli, VersionAndHelp) {
  Result v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_NE(v.out.find("mpbench"), std::string::npos);
  Result h = run("--help");
  EXPECT_EQ(h.code, 0);
  EXPECT_NE(h.out.find("Examples"), std::string::npos);
  Result rh = run("run --help");
  EXPECT_EQ(rh.code, 0);
  EXPECT_NE(rh.out.find("--precisions"), std::string::npos);
  // Every page has its exit codes once: compare's own list replaces the general one (it had
  // both), and its usage takes files, not "files(1x)" (optional: --current may name them).
  for (const char* page : {"--help", "run --help", "compare --help", "report --help"}) {
    const Result p = run(page);
    size_t n = 0;
    for (size_t at = p.out.find("Exit codes:"); at != std::string::npos;
         at = p.out.find("Exit codes:", at + 1))
      ++n;
    EXPECT_EQ(n, 1u) << page << "\n" << p.out;
  }
  const Result ch = run("compare --help");
  EXPECT_NE(ch.out.find("compare [OPTIONS] [files...]"), std::string::npos) << ch.out;
  EXPECT_NE(ch.out.find("143 interrupted"), std::string::npos) << ch.out;
}

// validate checks every file: one line (exit 2's contract) with the first refused file's
// reason and the other refused files' names, nothing on stdout; a name the file before it took
// is refused for that file alone, and said as such ("each validated alone says why" was said of
// a file that alone passes).
TEST_F(Cli, ValidateNamesEveryRefusedFile) {
  const std::string good = tiny();
  const std::string neg = write("neg.json", R"({"name": "n", "model": {"type": "mlp",
      "input_dim": 4, "hidden": [8, -3], "num_classes": 2}})");
  const std::string unk = write("unk.json", R"({"name": "u", "modell": {}})");
  const std::string twin = write("twin.json", read_file(good));
  const std::string json = (dir_ / "v.json").string();
  Result r = run("validate " + neg + " " + good + " " + unk + " " + twin + " --json " + json);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_EQ(count_lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("neg.json: model.hidden[1]"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("(also refused, each validated alone says why: " + unk +
                       ") (also refused, for a model name an earlier file has: " + twin + ")"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_FALSE(fs::exists(json));

  // A file refused past the name check (its per-step series over what a run may keep) is refused
  // for its own reason, and a refused twin leaves its name free: a later file of another name
  // passes.
  const std::string pinned = write("pinned.json", R"({"name": "p",
      "model": {"type": "mlp", "input_dim": 4, "hidden": [8], "num_classes": 2},
      "data": {"train_samples": 1000000}, "train": {"batch_size": 1, "epochs": 1000}})");
  const std::string other = write("other.json", R"({"name": "o",
      "model": {"type": "mlp", "input_dim": 4, "hidden": [8], "num_classes": 2}})");
  r = run("validate " + neg + " " + good + " " + pinned + " " + twin + " " + other);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has_text(r.err, "(also refused, each validated alone says why: " + pinned +
                                  ") (also refused, for a model name an earlier file has: " + twin +
                                  ")\n"))
      << r.err;
  // Past eight names the rest are counted.
  std::string many = neg;
  for (int i = 0; i < 9; ++i)
    many += " " + write("bad" + std::to_string(i) + ".json", R"({"name": "b", "modell": {}})");
  r = run("validate " + many);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has_text(r.err, (dir_ / "bad7.json").string() + " and 1 more)")) << r.err;
  EXPECT_FALSE(has_text(r.err, "bad8.json")) << r.err;
  // '-' is no file name for --json (stdout holds the ok lines): refused, nothing written.
  r = mpbench::test::run_shell(
      "cd " + dir_.string() + " && " + std::string(MPBENCH_EXE) + " validate " + good + " --json -",
      dir_.string());
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_TRUE(has_text(r.err, "--json -")) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "-"));
}

TEST_F(Cli, ValidateAndInspect) {
  Result v = run("validate " + tiny());
  EXPECT_EQ(v.code, 0) << v.err;
  EXPECT_NE(v.out.find("ok:"), std::string::npos);
  Result i = run("inspect " + tiny() + " --precision amp_fp16");
  EXPECT_EQ(i.code, 0) << i.err;
  EXPECT_NE(i.out.find("head"), std::string::npos);
  EXPECT_NE(i.out.find("fp16"), std::string::npos);
  // The table's act bytes total is smaller than the activations category: said why. It holds
  // fc1's fp16 output, which its ReLU's backward reads and the pinned head keeps only in fp32.
  EXPECT_NE(i.out.find("; activations hold the act bytes above (20.0 KiB) and "), std::string::npos)
      << i.out;
}

// amp_fp8: inspect names the GEMMs that run in FP8 (the Linear layers whose sizes are multiples
// of 16, not pinned), with their dtypes, and counts them; attention's GEMMs stay bf16.
TEST_F(Cli, InspectShowsTheFp8Gemms) {
  const std::string src = MPBENCH_SOURCE_DIR;
  const std::string json = (dir_ / "fp8.json").string();
  Result r =
      run("inspect " + src + "/configs/tiny_transformer.json --precision amp_fp8 --json " + json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("fp8_e4m3/fp8_e5m2"), std::string::npos);
  EXPECT_NE(r.out.find("fp8: 9 of 13 GEMMs run in FP8"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(doc["entries"].size(), 1u);
  const auto& layer1 = doc["entries"][0]["layers"][1];
  for (const auto& c : layer1["children"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const bool linear = c["kind"].get<std::string>().rfind("linear", 0) == 0;
    EXPECT_EQ(c.contains("fp8_dtypes"), linear);
    if (linear) {
      EXPECT_EQ(c["fp8_dtypes"]["forward"], "fp8_e4m3");
      EXPECT_EQ(c["fp8_dtypes"]["backward"], "fp8_e5m2");
      EXPECT_EQ(c["compute_dtype"], "bf16");  // what the GEMM writes and the rest computes in
    }
  }
  // At a batch off 16 the FP8 Linears run in bf16, and inspect says so (it named them FP8).
  const std::string mlp = spec_file("f8.json", R"({"name": "f8", "model": {"type": "mlp",
      "input_dim": 64, "hidden": [32], "num_classes": 16}, "data": {"train_samples": 512,
      "eval_samples": 128}, "train": {"batch_size": 40, "epochs": 1}})");
  Result off = run("inspect " + mlp + " --precision amp_fp8");
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_NE(off.out.find("fp8: 0 of 2 GEMMs run in FP8 (fp8_e4m3 inputs forward, fp8_e5m2 "
                         "gradients backward, delayed scaling); the rest in bf16, 2 of them for "
                         "the batch: at batch 40 their rows are not a multiple of 16"),
            std::string::npos)
      << off.out;
  EXPECT_EQ(off.out.find("fp8_e4m3/fp8_e5m2"), std::string::npos) << off.out;
  EXPECT_EQ(off.out.find("misaligned"), std::string::npos) << off.out;  // 40 is bf16's 8s
  // mnist_mlp pins its 10-wide head to fp32: fc1 and fc2 run in FP8.
  Result m = run("inspect " + src + "/configs/mnist_mlp.json --precision amp_fp8");
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_NE(m.out.find("fp8: 2 of 3 GEMMs run in FP8"), std::string::npos) << m.out;
  // Its pinned head (N = 10) is counted apart from the GEMMs held to the 16-bit multiple.
  Result b = run("inspect " + src + "/configs/mnist_mlp.json --precision amp_bf16");
  ASSERT_EQ(b.code, 0) << b.err;
  EXPECT_NE(b.out.find("tensor cores: all 2 GEMMs and convolutions have sizes that are multiples "
                       "of 8; 1 more runs in fp32 (fp32_layers), held to no multiple"),
            std::string::npos)
      << b.out;
}

// Sublayer rows by default, the blocks alone with --depth block; the JSON holds every layer with
// its children, whose sums are the layer's; the alignment check names GPT-2's vocabulary and
// ResNet-50's 3-channel stem in the 16-bit modes, and nothing in fp32.
TEST_F(Cli, InspectSublayersJsonAndAlignment) {
  const std::string src = MPBENCH_SOURCE_DIR;
  Result sub = run("inspect " + src + "/configs/tiny_transformer.json --precision amp_bf16");
  ASSERT_EQ(sub.code, 0) << sub.err;
  for (const char* row :
       {"  ln1", "  qkv", "  scores", "  softmax", "  attn_v", "  proj", "  ln2", "  fc1", "  fc2"})
    EXPECT_NE(sub.out.find(row), std::string::npos) << row;
  Result block = run("inspect " + src +
                     "/configs/tiny_transformer.json --precision amp_bf16 "
                     "--depth block");
  ASSERT_EQ(block.code, 0) << block.err;
  EXPECT_EQ(block.out.find("  qkv"), std::string::npos);
  EXPECT_NE(block.out.find("layer1"), std::string::npos);

  const std::string json = (dir_ / "inspect.json").string();
  Result g = run("inspect " + src + "/configs/gpt2_small.json --json " + json);
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_NE(g.out.find("head N=50257"), std::string::npos);
  const auto doc = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(doc["entries"].size(), 4u);
  for (const auto& e : doc["entries"]) {
    SCOPED_TRACE(e["precision"].get<std::string>());
    EXPECT_EQ(e["model"], "gpt2_small");
    EXPECT_EQ(e["batch_size"], 16);
    EXPECT_EQ(e["params"], 124439808);
    int64_t params = 0;
    double flops = 0;
    for (const auto& l : e["layers"]) {
      params += l["params"].get<int64_t>();
      flops += l["forward_flops"].get<double>();
      if (l["children"].empty()) continue;
      int64_t cp = 0, ca = 0;
      double cf = 0;
      for (const auto& c : l["children"]) {
        cp += c["params"].get<int64_t>();
        cf += c["forward_flops"].get<double>();
        ca += c["activation_bytes"].get<int64_t>();
      }
      EXPECT_EQ(cp, l["params"]) << l["name"];
      EXPECT_DOUBLE_EQ(cf, l["forward_flops"].get<double>()) << l["name"];
      EXPECT_EQ(ca, l["activation_bytes"]) << l["name"];
      EXPECT_EQ(l["children"].size(), 9u) << l["name"];
      const auto& softmax = l["children"][3];
      EXPECT_EQ(softmax["name"], "softmax");
      EXPECT_EQ(softmax["compute_dtype"], "fp32");
      EXPECT_EQ(l["children"][0]["compute_dtype"], "fp32");  // ln1's statistics
    }
    EXPECT_EQ(params, 124439808);
    EXPECT_DOUBLE_EQ(flops, e["forward_flops"].get<double>());
    const bool sixteen = e["precision"] == "amp_fp16" || e["precision"] == "amp_bf16";
    const auto& head = e["layers"].back();
    EXPECT_EQ(head["matmul"]["n"], 50257);
    EXPECT_EQ(head["misaligned"].size(), (e["precision"] == "fp32" ? 0u : 1u));
    EXPECT_EQ(e["tensor_core_multiple"], sixteen ? 8 : (e["precision"] == "tf32" ? 4 : 0));
    // As run's JSON writes the prediction: the total and its categories.
    EXPECT_GT(e["predicted_memory_bytes"]["training"].get<double>(), 1e9);
    EXPECT_GT(e["predicted_memory_bytes"]["by_category"]["activations"].get<double>(), 0);
  }

  Result r = run("inspect " + src + "/configs/resnet50.json --precision amp_fp16");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("1 of 54 GEMMs and convolutions"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("stem.conv C_in=3"), std::string::npos);
  Result f = run("inspect " + src + "/configs/resnet50.json --precision fp32");
  EXPECT_NE(f.out.find("fp32 uses none"), std::string::npos);
}

// explain on the CPU: the comparison against fp32 with every kind, no bound (no datasheet peaks
// for a CPU), the note that these are times of the emulation (run's), and the same in JSON and
// Markdown;
// two rounds pooled (--repeat 2).
TEST_F(Cli, ExplainComparesEachModeWithFp32) {
  const std::string src = MPBENCH_SOURCE_DIR;
  const std::string json = (dir_ / "explain.json").string(), md = (dir_ / "explain.md").string();
  Result r = run("explain " + src +
                 "/configs/tiny_transformer.json --device reference --steps 3 --repeat 2 "
                 "--precisions amp_bf16,fp32,tf32 --quiet --json " +
                 json + " --md " + md);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 interleaved rounds of 3 profiled steps per mode"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("amp_bf16 vs fp32: measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tf32 vs fp32: measured"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("note: on the CPU reference backend the times are of emulated"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("gemm/conv"), std::string::npos);
  const auto doc = nlohmann::json::parse(read_file(json));
  EXPECT_EQ(doc["baseline"], "fp32");
  EXPECT_EQ(doc["emulated"], true);
  EXPECT_EQ(doc["rounds"], 2);
  EXPECT_EQ(doc["profiled_steps_per_round"], 3);
  for (const auto& m : doc["modes"]) EXPECT_EQ(m["profiled_steps"], 6) << m.dump();
  ASSERT_EQ(doc["comparisons"].size(), 2u);
  for (const auto& c : doc["comparisons"]) {
    EXPECT_EQ(c["from"], "fp32");
    EXPECT_TRUE(c["bound"].is_null());
    const double eligible = c["eligible_fraction"].get<double>();
    EXPECT_GT(eligible, 0.0);
    EXPECT_LT(eligible, 1.0);
    double from_sum = 0;
    for (const auto& k : c["by_kind"]) from_sum += k["from_ms_per_step"].get<double>();
    EXPECT_NEAR(from_sum, c["from_step_ms"].get<double>(), 1e-9 * from_sum);  // with host gaps
    EXPECT_NEAR(c["measured_speedup"].get<double>(),
                c["from_step_ms"].get<double>() / c["to_step_ms"].get<double>(), 1e-9);
    EXPECT_TRUE(c["flags"].is_array());
  }
  EXPECT_NE(read_file(md).find("| kind |"), std::string::npos);
}

// run --seeds: every seed's run in the JSON with its seed, a seed_summary per mode, one table row
// per mode with the accuracy over the seeds and its difference from fp32; compare pairs the
// runs seed by seed and report draws the accuracy with its spread.
TEST_F(Cli, SeedsSweepSummarisedComparedAndReported) {
  const std::string json = (dir_ / "seeds.json").string();
  Result r = run("run " + tiny() +
                 " --device reference --quiet --epochs 1 --seeds 3 "
                 "--precisions fp32,amp_bf16 --json " +
                 json);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("acc vs fp32 (95% CI)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("│     3 │"), std::string::npos) << r.out;
  const auto doc = nlohmann::json::parse(read_file(json));
  ASSERT_EQ(doc["runs"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(doc["runs"][i]["seed"], i % 3 + 1);
  ASSERT_EQ(doc["seed_summary"].size(), 2u);
  const auto& bf16 = doc["seed_summary"][1];
  EXPECT_EQ(bf16["precision"], "amp_bf16");
  EXPECT_EQ(bf16["seeds"], 3);
  for (const char* k : {"mean", "ci95_low", "ci95_high"})
    EXPECT_TRUE(bf16["accuracy_delta_vs_fp32"][k].is_number()) << k;
  EXPECT_LE(bf16["accuracy_delta_vs_fp32"]["ci95_low"].get<double>(),
            bf16["accuracy_delta_vs_fp32"]["ci95_high"].get<double>());

  const std::string cmp = (dir_ / "cmp.json").string();
  Result c = run("compare " + json + " " + json + " --json " + cmp);
  EXPECT_NE(c.code, 2) << c.err;
  const auto rows = nlohmann::json::parse(read_file(cmp))["rows"];
  ASSERT_EQ(rows.size(), 6u);
  for (const auto& row : rows) {
    EXPECT_TRUE(row["seed"].is_number());
    EXPECT_NE(row["verdict"], "missing");
  }
  const std::string html = (dir_ / "seeds.html").string();
  Result h = run("report " + json + " --html " + html);
  ASSERT_EQ(h.code, 0) << h.err;
  const std::string page = read_file(html);
  EXPECT_NE(page.find("chart-accuracy"), std::string::npos);
  EXPECT_NE(page.find("Accuracy over seeds"), std::string::npos);
  // Two seeded files of one model: their labels are told apart by file, and every series keeps
  // its own accuracy bar (2 modes x 2 files).
  const std::string copy = (dir_ / "seeds_again.json").string();
  fs::copy_file(json, copy);
  Result two = run("report " + json + " " + copy + " --html " + html);
  ASSERT_EQ(two.code, 0) << two.err;
  const std::string both = read_file(html);
  size_t bars = 0;
  for (size_t at = both.find("accuracy over 3 seeds"); at != std::string::npos;
       at = both.find("accuracy over 3 seeds", at + 1))
    ++bars;
  EXPECT_EQ(bars, 4u);
}

// Without a driver the CUDA runtime reports an "insufficient driver": on a machine without a GPU
// the reason given is that there is no driver, not that it is too old.
TEST_F(Cli, DevicesWithoutADriverSaySo) {
  if (void* driver = dlopen("libcuda.so.1", RTLD_LAZY)) {
    dlclose(driver);
    GTEST_SKIP() << "an NVIDIA driver is installed";
  }
  const Result r = run("devices --json");
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string why = nlohmann::json::parse(r.out).at("no_cuda_reason").get<std::string>();
  EXPECT_TRUE(has_text(why, "no NVIDIA driver") || has_text(why, "built without CUDA")) << why;
  EXPECT_FALSE(has_text(why, "insufficient")) << why;
}

// As root (CI), the old writer renamed a temporary file over /dev/null and over links.
TEST_F(Cli, OutputsIntoDevicesLinksAndStdoutDestroyNothing) {
  const fs::path target = dir_ / "target.csv", link = dir_ / "link.csv";
  write("target.csv", "old");
  fs::create_symlink("target.csv", link);
  Result r =
      run("run " + tiny() + " --device reference --epochs 1 --precisions fp32 --json /dev/null" +
          " --csv " + link.string() + " --md /dev/stdout");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read_file(target.string()).rfind("model,", 0), 0u) << read_file(target.string());
  // The Markdown table follows the console table on stdout; neither is lost.
  EXPECT_NE(r.out.find("tiny_mlp"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| fp32"), std::string::npos) << r.out;
}

TEST(MemorySize, UnitsAndRefusals) {
  using mpbench::parse_memory_size;
  EXPECT_EQ(parse_memory_size("--m", "1000000"), 1000000u);
  EXPECT_EQ(parse_memory_size("--m", "16GiB"), uint64_t{16} << 30);
  EXPECT_EQ(parse_memory_size("--m", "512 MiB"), uint64_t{512} << 20);
  EXPECT_EQ(parse_memory_size("--m", "4KiB"), 4096u);
  EXPECT_EQ(parse_memory_size("--m", "16GB"), 16000000000u);
  EXPECT_EQ(parse_memory_size("--m", "2MB"), 2000000u);
  EXPECT_EQ(parse_memory_size("--m", "1.5GiB"), uint64_t{3} << 29);
  EXPECT_EQ(parse_memory_size("--m", "2TiB"), uint64_t{2} << 40);
  EXPECT_EQ(parse_memory_size("--m", "1TB"), 1000000000000u);
  // Spaces around the size (shell quoting) are dropped, as between number and unit.
  EXPECT_EQ(parse_memory_size("--m", " 1MiB"), uint64_t{1} << 20);
  EXPECT_EQ(parse_memory_size("--m", "1GiB "), uint64_t{1} << 30);
  try {
    parse_memory_size("--m", "1G");
    FAIL() << "1G was taken";
  } catch (const mpbench::Error& e) {
    EXPECT_NE(std::string(e.what()).find("(units: B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)"),
              std::string::npos)
        << e.what();
  }
  for (const char* bad : {"", "GiB", "16 XB", "0", "0.1B", "1.5", "-3", "1e9", "16gib", "1..5GiB",
                          "99999999999999999999GiB"})
    EXPECT_THROW(parse_memory_size("--m", bad), mpbench::Error) << bad;
}

// Numbers of more digits than the 128-bit arithmetic holds are refused before it wraps: 2^128 + 5
// bytes is not 5 bytes, and a fraction of 39 digits whose 10^39 wraps to itself is not 1 byte.
TEST(MemorySize, DigitsBeyondTheArithmeticAreRefused) {
  using mpbench::parse_memory_size;
  EXPECT_THROW(parse_memory_size("--m", "340282366920938463463374607431768211461"), mpbench::Error);
  EXPECT_THROW(parse_memory_size("--m", "0.319435266158123073073250785136463577088B"),
               mpbench::Error);
}

// A sweep's batch sizes: 1 to 2^20, a number of any length refused in the same words (not
// thrown by the conversion as an internal error).
TEST(BatchSizes, FromOneTo2To20) {
  using mpbench::parse_batch_sizes;
  EXPECT_EQ(parse_batch_sizes("--b", "1,1048576"), (std::vector<int64_t>{1, 1048576}));
  for (const char* bad : {"1048577", "99999999", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    try {
      parse_batch_sizes("--batch-sizes", bad);
      ADD_FAILURE() << "taken";
    } catch (const mpbench::Error& e) {
      EXPECT_EQ(e.kind(), mpbench::ErrorKind::BadInput);
      EXPECT_EQ(std::string(e.what()),
                std::string("--batch-sizes: expected batch sizes from 1 to 1048576 separated by "
                            "commas, got '") +
                    bad + "'");
    }
  }
}

// Sizes are computed exactly, in whole bytes: a fraction of a byte is bad input, never rounded
// down ("1.5B" was 1 byte), and the number is plain decimal.
TEST(MemorySize, WholeBytesExactly) {
  using mpbench::parse_memory_size;
  EXPECT_EQ(parse_memory_size("--m", "0.5KiB"), 512u);
  EXPECT_EQ(parse_memory_size("--m", "0.0009765625KiB"), 1u);  // 2^-10 KiB
  EXPECT_EQ(parse_memory_size("--m", "1.1KB"), 1100u);
  EXPECT_EQ(parse_memory_size("--m", "0.3MB"), 300000u);
  EXPECT_EQ(parse_memory_size("--m", "1.50000GB"), 1500000000u);
  EXPECT_EQ(parse_memory_size("--m", "0.000000001GB"), 1u);
  EXPECT_EQ(parse_memory_size("--m", "18446744073709551615"), UINT64_MAX);
  EXPECT_EQ(parse_memory_size("--m", "2B"), 2u);
  // A TiB's fractions take up to 40 digits (2^-40 TiB is a byte), past 10^38 in 128 bits: the 31
  // digits of 2^-31 TiB were refused as '(whole bytes)'.
  EXPECT_EQ(parse_memory_size("--m", "0.0000000004656612873077392578125TiB"), 512u);
  EXPECT_EQ(parse_memory_size("--m", "0.0000000000009094947017729282379150390625TiB"), 1u);
  EXPECT_EQ(parse_memory_size("--m", "1.0000000000009094947017729282379150390625TiB"),
            (uint64_t{1} << 40) + 1);
  for (const char* bad :
       {"1.5B", "0.5B", "1.0001KB", "0.0000000001GB", "0.001KiB", "010GiB", ".5GiB", "5.GiB",
        "0x10", "0x10MiB", "+5GiB", "18446744073709551616", "17179869184GiB", "1.5 B", "1. 5GiB",
        "0.00000000000045474735088646411895751953125TiB",  // half a byte, 41 digits
        "0.0000000000009094947017729282379150390624TiB", "0.0000000000001TB"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(parse_memory_size("--m", bad), mpbench::Error);
  }
  try {
    parse_memory_size("--memory-limit", "1.5B");
  } catch (const mpbench::Error& e) {
    EXPECT_NE(std::string(e.what()).find("(whole bytes), got '1.5B'"), std::string::npos)
        << e.what();
  }
}

// Under a cap between the two modes' needs, fp32 is an oom row naming what did not fit, and
// amp_bf16 still trains (tiny_resnet: 684 KB in fp32, 408 KB in amp_bf16 on the CPU).
TEST_F(Cli, MemoryLimitMakesAnOomRowAndTheOtherModesRun) {
  const fs::path json = dir_ / "r.json";
  const std::string spec = std::string(MPBENCH_SOURCE_DIR) + "/configs/tiny_resnet.json";
  Result r = run("run " + spec + " --device reference --epochs 1 --precisions fp32,amp_bf16 " +
                 "--memory-limit 500KB --quiet --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(json.string()));
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["status"], "oom");
  const std::string why = j["runs"][0]["status_detail"];
  EXPECT_NE(why.find("over the memory limit of 488.3 KiB"), std::string::npos) << why;
  EXPECT_NE(why.find("asked for"), std::string::npos) << why;
  EXPECT_EQ(j["runs"][1]["status"], "ok");
  EXPECT_LE(j["runs"][1]["peak_memory_bytes"]["training"].get<uint64_t>(), 500000u);
  EXPECT_NE(r.out.find("oom"), std::string::npos) << r.out;
}

// maxbatch finds each mode's largest batch under the limit and writes it everywhere; on the CPU
// without a limit it says which default it used.
// The probes' synthetic data holds any batch; the spec's may not, and run refuses a batch above
// it: a note says so (tiny_mlp under 2 MiB: batch 3,762 of 2,048 samples).
TEST_F(Cli, MaxBatchNamesABatchAboveTheSpecsData) {
  const fs::path md = dir_ / "m.md";
  const std::string spec = std::string(MPBENCH_SOURCE_DIR) + "/configs/tiny_mlp.json";
  const Result r =
      run("maxbatch " + spec +
          " --device reference --precisions fp32 --memory-limit 2MiB --quiet --md " + md.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("note: tiny_mlp fp32: batch 3,762 is more than the spec's "
                       "data.train_samples (2,048)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(read_file(md.string()).find("batch 3,762 is more than"), std::string::npos);
}

TEST_F(Cli, MaxBatchTableAndFiles) {
  const fs::path json = dir_ / "m.json", csv = dir_ / "m.csv", md = dir_ / "m.md";
  const std::string spec = std::string(MPBENCH_SOURCE_DIR) + "/configs/tiny_resnet.json";
  Result r = run("maxbatch " + spec + " --device reference --precisions fp32,amp_bf16 " +
                 "--memory-limit 1MiB --multiple 8 --json " + json.string() + " --csv " +
                 csv.string() + " --md " + md.string());
  ASSERT_EQ(r.code, 0) << r.err;
  // Each mode starts from the predicted batch: it trains, the next multiple of 8 does not.
  // The reference's prediction is exact, and the probe's line says so (the figure the next
  // guess would add).
  EXPECT_NE(r.err.find("tiny_resnet fp32 batch 48: trains, "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" of training memory (as predicted)\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tiny_resnet fp32 batch 56: oom"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(": oom: over the memory limit of 1.0 MiB"), std::string::npos) << r.err;
  const auto j = nlohmann::json::parse(read_file(json.string()));
  EXPECT_EQ(j["memory_limit_bytes"], 1u << 20);
  EXPECT_EQ(j["multiple"], 8);
  EXPECT_EQ(j["steps_per_probe"], 2);  // the default
  ASSERT_EQ(j["max_batch"].size(), 2u);
  const auto& fp32 = j["max_batch"][0];
  const auto& bf16 = j["max_batch"][1];
  EXPECT_EQ(fp32["model"], "tiny_resnet");
  EXPECT_EQ(bf16["precision"], "amp_bf16");
  for (const auto* m : {&fp32, &bf16}) {
    EXPECT_GT((*m)["max_batch"].get<int64_t>(), 0);
    EXPECT_EQ((*m)["max_batch"].get<int64_t>() % 8, 0);
    EXPECT_LE((*m)["peak_memory_bytes"]["training"].get<uint64_t>(), 1u << 20);
    EXPECT_GT((*m)["samples_per_second"].get<double>(), 0);
  }
  // The reference's prediction is exact: a probe that trained took what it predicted, and the
  // one refused at the limit needed more than the limit, and no more than predicted.
  ASSERT_EQ(fp32["probes"].size(), 2u);
  const auto &trained = fp32["probes"][0], &refused = fp32["probes"][1];
  EXPECT_EQ(trained["training_bytes"], trained["predicted_training_bytes"]);
  EXPECT_TRUE(trained["needed_bytes_at_least"].is_null());
  EXPECT_TRUE(refused["training_bytes"].is_null());
  EXPECT_GT(refused["needed_bytes_at_least"].get<uint64_t>(), 1u << 20);
  EXPECT_LE(refused["needed_bytes_at_least"].get<uint64_t>(),
            refused["predicted_training_bytes"].get<uint64_t>());
  EXPECT_DOUBLE_EQ(bf16["vs_fp32"].get<double>(),
                   bf16["max_batch"].get<double>() / fp32["max_batch"].get<double>());
  EXPECT_EQ(bf16["ratio_baseline"], "fp32");
  const std::string table = r.out;
  EXPECT_NE(table.find("memory 1.0 MiB (--memory-limit)"), std::string::npos) << table;
  EXPECT_NE(table.find(std::to_string(bf16["max_batch"].get<int64_t>())), std::string::npos);
  EXPECT_NE(read_file(csv.string())
                .find("tiny_resnet,amp_bf16," + std::to_string(bf16["max_batch"].get<int64_t>())),
            std::string::npos);
  EXPECT_NE(read_file(md.string()).find("| tiny_resnet | amp_bf16 |"), std::string::npos);
  // A file's batch past what any spec takes is not one maxbatch wrote: report refuses it.
  auto edited = j;
  edited["max_batch"][0]["max_batch"] = int64_t{1} << 21;
  std::ofstream(dir_ / "big.json") << edited.dump();
  const Result refused_file =
      run("report " + (dir_ / "big.json").string() + " --html " + (dir_ / "big.html").string());
  EXPECT_EQ(refused_file.code, 2) << refused_file.err;
  EXPECT_NE(refused_file.err.find("max_batch[0].max_batch: expected at most 1048576"),
            std::string::npos)
      << refused_file.err;

  // No limit on the CPU: the stated default, never the host's memory. 16384 rows of a 65536-wide
  // layer need 8 GiB of activations: over it, so that batch is refused before it is allocated.
  const std::string wide =
      spec_file("wide.json", R"({"name": "wide", "model": {"type": "mlp", "input_dim": 16,
      "hidden": [65536], "num_classes": 4}, "data": {"train_samples": 256, "eval_samples": 64},
      "train": {"batch_size": 32, "epochs": 1}})");
  r = run("maxbatch " + wide + " --device reference --precisions fp32 --multiple 16384 --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("memory 4.00 GiB (the CPU default)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("none fits"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("oom at 16,384"), std::string::npos) << r.out;
}

// amp_fp8's batch multiple, lcm(K, 16), past 2^20: no batch it may try is one a spec takes.
// The row says so and the JSON that the spec's limit, not memory, bound it (it said "none
// fits" with an empty "bound by" and at_spec_limit false).
// A probe trains the steps asked for, on synthetic data grown to them: the data a probe holds
// grows with --steps at the same batch (training memory, and so the batch found, does not).
TEST_F(Cli, MaxBatchProbesTrainTheStepsAskedFor) {
  const auto probe = [&](int steps) {
    const fs::path out = dir_ / ("s" + std::to_string(steps) + ".json");
    const Result r = run("maxbatch " + tiny() +
                         " --device reference --quiet --precisions fp32 --memory-limit 1MiB "
                         "--steps " +
                         std::to_string(steps) + " --json " + out.string());
    EXPECT_EQ(r.code, 0) << r.err;
    const auto j = nlohmann::json::parse(read_file(out.string()));
    EXPECT_EQ(j["steps_per_probe"], steps);
    return j["max_batch"][0];
  };
  const auto one = probe(1), four = probe(4);
  EXPECT_EQ(one["max_batch"], four["max_batch"]);
  EXPECT_GT(four["peak_memory_bytes"]["data"].get<uint64_t>(),
            one["peak_memory_bytes"]["data"].get<uint64_t>());
}

// The title counts the steps a probe trains, one step in the singular.
TEST_F(Cli, MaxBatchTitleCountsTheSteps) {
  for (const auto& [steps, text] :
       {std::pair{1, "1 step a probe"}, std::pair{2, "2 steps a probe"}}) {
    const Result r = run("maxbatch " + tiny() +
                         " --device reference --quiet --precisions fp32 --memory-limit 1MiB "
                         "--steps " +
                         std::to_string(steps));
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(has_text(r.out, text)) << r.out;
  }
}

// The note on a batch above the spec's data is for a batch past data.train_samples, not one
// equal to it (run takes that batch).
TEST_F(Cli, MaxBatchNotesOnlyABatchPastTheSpecsData) {
  const fs::path out = dir_ / "first.json";
  const std::string args = " --device reference --precisions fp32 --memory-limit 2MiB --quiet";
  ASSERT_EQ(run("maxbatch " + tiny() + args + " --json " + out.string()).code, 0);
  const int64_t found =
      nlohmann::json::parse(read_file(out.string()))["max_batch"][0]["max_batch"].get<int64_t>();
  ASSERT_GT(found, 1);
  auto spec = nlohmann::json::parse(read_file(tiny()));
  for (const int64_t samples : {found, found - 1}) {
    spec["data"]["train_samples"] = samples;
    const std::string file = spec_file("s" + std::to_string(samples) + ".json", spec.dump());
    const Result r = run("maxbatch " + file + args + " --json " + out.string());
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_EQ(nlohmann::json::parse(read_file(out.string()))["max_batch"][0]["max_batch"], found);
    EXPECT_EQ(has_text(r.out, "is more than the spec's data.train_samples"), samples < found)
        << samples << ": " << r.out;
  }
}

// A mode whose prediction fits no batch has no predicted batch in the JSON (null, not 0).
TEST_F(Cli, MaxBatchWritesNoPredictionWhereNoneFits) {
  const fs::path out = dir_ / "p.json";
  const Result r = run("maxbatch " + std::string(MPBENCH_SOURCE_DIR) +
                       "/configs/tiny_resnet.json --device reference --precisions fp32,amp_bf16 "
                       "--memory-limit 43000B --quiet --json " +
                       out.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(out.string()));
  ASSERT_EQ(j["max_batch"][0]["max_batch"], 0) << j["max_batch"][0];
  EXPECT_TRUE(j["max_batch"][0]["predicted_max_batch"].is_null()) << j["max_batch"][0];
  EXPECT_GT(j["max_batch"][1]["predicted_max_batch"].get<int64_t>(), 0) << j["max_batch"][1];
}

TEST_F(Cli, MaxBatchMultiplePastTheSpecLimitSaysSo) {
  const fs::path json = dir_ / "m.json", csv = dir_ / "m.csv";
  const Result r = run("maxbatch " + tiny() +
                       " --device reference --precisions amp_fp8 --multiple 1048575 "
                       "--memory-limit 1GiB --quiet --json " +
                       json.string() + " --csv " + csv.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out,
                       "no multiple of 16,777,200 within the largest batch a spec takes "
                       "(1,048,576)"))
      << r.out;
  EXPECT_TRUE(has_text(r.out, "none tried")) << r.out;  // not "none fits": nothing was
  EXPECT_FALSE(has_text(r.out, "none fits")) << r.out;
  const fs::path md = dir_ / "r.md";
  ASSERT_EQ(run("report " + json.string() + " --html " + (dir_ / "r.html").string() + " --md " +
                md.string())
                .code,
            0);
  EXPECT_TRUE(has_text(read_file(md.string()), "none tried")) << read_file(md.string());
  const auto m = nlohmann::json::parse(read_file(json.string()))["max_batch"][0];
  EXPECT_EQ(m["max_batch"], 0) << m;
  EXPECT_EQ(m["multiple"], 16777200) << m;
  EXPECT_EQ(m["at_spec_limit"], true) << m;
  EXPECT_TRUE(m["probes"].empty()) << m;
  EXPECT_TRUE(has_text(read_file(csv.string()), "tiny_mlp,amp_fp8,0,true,"));
}

// Without fp32 among the modes the ratios are against the first listed, as run's are: the
// header names it, and so do the JSON and CSV (every ratio was "-" and vs_fp32 null), and the
// report drawn from the file.
TEST_F(Cli, MaxBatchWithoutFp32ComparesWithTheFirstMode) {
  const fs::path json = dir_ / "m.json", csv = dir_ / "m.csv", md = dir_ / "m.md";
  const Result r = run("maxbatch " + tiny() +
                       " --device reference --precisions amp_bf16,amp_fp8 --memory-limit 256KiB "
                       "--multiple 3 --quiet --json " +
                       json.string() + " --csv " + csv.string() + " --md " + md.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "vs amp_bf16")) << r.out;
  EXPECT_FALSE(has_text(r.out, "vs fp32")) << r.out;
  EXPECT_TRUE(has_text(read_file(md.string()), "| vs amp_bf16 |"));
  const auto j = nlohmann::json::parse(read_file(json.string()));
  ASSERT_EQ(j["max_batch"].size(), 2u);
  const auto &bf16 = j["max_batch"][0], &fp8 = j["max_batch"][1];
  ASSERT_GT(bf16["max_batch"].get<int64_t>(), 0) << bf16;
  ASSERT_GT(fp8["max_batch"].get<int64_t>(), 0) << fp8;
  for (const auto* m : {&bf16, &fp8}) EXPECT_EQ((*m)["ratio_baseline"], "amp_bf16") << *m;
  EXPECT_DOUBLE_EQ(bf16["vs_fp32"].get<double>(), 1.0);
  const double ratio = fp8["max_batch"].get<double>() / bf16["max_batch"].get<double>();
  EXPECT_DOUBLE_EQ(fp8["vs_fp32"].get<double>(), ratio);
  EXPECT_TRUE(has_text(r.out, fmt::format("{:.2f}x", ratio))) << r.out;
  const std::string c = read_file(csv.string());
  EXPECT_TRUE(has_text(c.substr(0, c.find('\n')), ",ratio_baseline,mpbench_version")) << c;
  EXPECT_TRUE(has_text(c, fmt::format(",{},", ratio))) << c;
  EXPECT_TRUE(has_text(c, ",ok,amp_bf16," + j["tool"]["version"].get<std::string>() + "\n")) << c;

  const Result rep = run("report " + json.string() + " --html " + (dir_ / "r.html").string() +
                         " --md " + (dir_ / "r.md").string());
  ASSERT_EQ(rep.code, 0) << rep.err;
  EXPECT_TRUE(has_text(read_file((dir_ / "r.md").string()), "| vs amp_bf16 |"));
  EXPECT_TRUE(has_text(read_file((dir_ / "r.html").string()), "ratio to amp_bf16"));
}

// Models of different baselines: the header says "vs baseline" and a note names each model's
// that is not fp32, once, and none for the model that has fp32.
TEST_F(Cli, MaxBatchNotesEachModelsBaselineWhereTheyDiffer) {
  auto spec = nlohmann::json::parse(read_file(tiny()));
  spec["name"] = "nofp32";
  spec["precisions"] = {"amp_bf16", "amp_fp16"};
  const std::string other = spec_file("nofp32.json", spec.dump());
  const Result r = run("maxbatch " + tiny() + " " + other +
                       " --device reference --memory-limit 256KiB --quiet");  // each spec's modes
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "vs baseline")) << r.out;
  EXPECT_EQ(r.out.find("ratios against"), r.out.rfind("ratios against")) << r.out;  // once
  EXPECT_TRUE(has_text(r.out,
                       "note: nofp32: ratios against amp_bf16, the first of its modes (no "
                       "fp32)"))
      << r.out;
}

// A baseline that fits nothing gives no ratio (not "infx").
TEST_F(Cli, MaxBatchHasNoRatioToABaselineThatFitsNothing) {
  const fs::path csv = dir_ / "n.csv";
  const Result r = run("maxbatch " + std::string(MPBENCH_SOURCE_DIR) +
                       "/configs/tiny_resnet.json --device reference --precisions fp32,amp_bf16 "
                       "--memory-limit 43000B --quiet --csv " +
                       csv.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(has_text(r.out, "none fits")) << r.out;
  EXPECT_FALSE(has_text(r.out, "inf")) << r.out;
  EXPECT_FALSE(has_text(read_file(csv.string()), "inf")) << read_file(csv.string());
}

// A sweep trains every mode at every batch size; each run's ratios are against fp32 at its own
// batch, and the report draws speedup against batch.
TEST_F(Cli, BatchSizesSweep) {
  const fs::path json = dir_ / "s.json", html = dir_ / "s.html";
  Result r = run("run " + tiny() + " --device reference --epochs 1 --precisions fp32,amp_bf16 " +
                 "--batch-sizes 32,128 --quiet --json " + json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("batches 32, 128"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(json.string()));
  ASSERT_EQ(j["runs"].size(), 4u);
  const std::vector<std::pair<int, std::string>> want = {
      {32, "fp32"}, {32, "amp_bf16"}, {128, "fp32"}, {128, "amp_bf16"}};
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(j["runs"][i]["batch_size"], want[i].first) << i;
    EXPECT_EQ(j["runs"][i]["precision"], want[i].second) << i;
  }
  EXPECT_EQ(j["specs"].size(), 2u);
  r = run("report " + json.string() + " --html " + html.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = read_file(html.string());
  EXPECT_NE(page.find("chart-speedup-batch"), std::string::npos);
  EXPECT_NE(page.find(">amp_bf16 b128<"), std::string::npos);
  // Compared with itself, every batch finds its own row.
  const fs::path cmp = dir_ / "c.json";
  r = run("compare " + json.string() + " " + json.string() + " --json " + cmp.string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const auto c = nlohmann::json::parse(read_file(cmp.string()));
  ASSERT_EQ(c["rows"].size(), 4u);
  for (const auto& row : c["rows"]) {
    EXPECT_NE(row["verdict"], "missing");
    EXPECT_NE(row["verdict"], "new");
  }
  EXPECT_EQ(c["rows"][2]["batch_size"], 128);
}

TEST_F(Cli, RunWritesAllOutputs) {
  fs::path json = dir_ / "r.json", csv = dir_ / "r.csv", md = dir_ / "r.md";
  Result r =
      run("run " + tiny() + " --device reference --epochs 1 --precisions fp32,amp_bf16 --json " +
          json.string() + " --csv " + csv.string() + " --md " + md.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("amp_bf16"), std::string::npos) << r.out;
  auto j = nlohmann::json::parse(read_file(json.string()));
  EXPECT_EQ(j["schema_version"], 1);
  ASSERT_EQ(j["runs"].size(), 2u);
  EXPECT_EQ(j["runs"][0]["precision"], "fp32");
  EXPECT_EQ(j["runs"][1]["status"], "ok");
  EXPECT_EQ(j["runs"][0]["epochs"].size(), 1u);
  EXPECT_EQ(j["spec"].is_null() && j["specs"].is_null(), false);
  // What the CPU numbers depend on: the BLAS and its threads.
  EXPECT_GE(j["env"]["cpu"]["blas_threads"].get<int>(), 1);
  EXPECT_TRUE(j["env"]["cpu"]["blas_threading"].is_string());
  EXPECT_TRUE(j["env"]["cpu"].contains("omp_num_threads"));
  std::string c = read_file(csv.string());
  EXPECT_EQ(std::count(c.begin(), c.end(), '\n'), 3) << c;  // header + 2 rows
  EXPECT_NE(read_file(md.string()).find("|"), std::string::npos);
  // The notes the console prints under its tables travel in the Markdown too.
  EXPECT_NE(read_file(md.string()).find("_note: on the CPU reference backend"), std::string::npos)
      << read_file(md.string());
  // Temporary files are renamed away.
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp"), std::string::npos) << e.path();
}

// run --repeat: every mode trained again, interleaved (fp32, bf16, fp32, bf16), each a fresh
// model with the same seed, so the numerics are identical; the table gives the median and the
// spread between the repetitions, the JSON and CSV every repetition, and compare of one file
// with two repetitions a side says it needs three.
TEST_F(Cli, RepeatInterleavesModesWithIdenticalNumerics) {
  const fs::path json = dir_ / "rep.json", csv = dir_ / "rep.csv";
  Result r = run("run " + tiny() +
                 " --device reference --epochs 1 --repeat 2 --precisions fp32,amp_bf16 " +
                 "--json " + json.string() + " --csv " + csv.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("2 repetitions"), std::string::npos) << r.out;
  const auto j = nlohmann::json::parse(read_file(json.string()));
  ASSERT_EQ(j["runs"].size(), 4u);
  const std::vector<std::pair<std::string, int>> order = {
      {"fp32", 1}, {"amp_bf16", 1}, {"fp32", 2}, {"amp_bf16", 2}};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(j["runs"][i]["precision"], order[i].first) << i;
    EXPECT_EQ(j["runs"][i]["repetition"], order[i].second) << i;
  }
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(j["runs"][i]["final_loss"], j["runs"][i + 2]["final_loss"]) << i;
    EXPECT_EQ(j["runs"][i]["final_accuracy"], j["runs"][i + 2]["final_accuracy"]) << i;
    EXPECT_EQ(j["runs"][i]["epochs"][0]["train_loss"], j["runs"][i + 2]["epochs"][0]["train_loss"]);
  }
  // Two repetitions are too few for a speedup's interval: the summary says how many, no interval.
  ASSERT_EQ(j["repeat_summary"].size(), 2u) << j["repeat_summary"];
  EXPECT_EQ(j["repeat_summary"][1]["repetitions"], 2);
  EXPECT_TRUE(j["repeat_summary"][1]["speedup_vs_fp32"].is_null());
  const std::string c = read_file(csv.string());
  EXPECT_NE(c.find(",repetition,flags,"), std::string::npos) << c;
  EXPECT_EQ(std::count(c.begin(), c.end(), '\n'), 5) << c;
  // The warnings travel with the numbers: the emulation in the JSON's flags and the CSV.
  // fp32 is real fp32 (its noise flags depend on the machine's load, so are not asserted).
  EXPECT_EQ(j["runs"][0]["flags"].dump().find("emulated"), std::string::npos);
  EXPECT_NE(j["runs"][1]["flags"].dump().find("emulated"), std::string::npos);
  EXPECT_NE(c.find(",2,emulated"), std::string::npos) << c;

  const fs::path cmp = dir_ / "cmp.json";
  r = run("compare " + json.string() + " " + json.string() + " --json " + cmp.string());
  EXPECT_EQ(r.code, 0) << r.out << r.err;
  const auto k = nlohmann::json::parse(read_file(cmp.string()));
  ASSERT_EQ(k["rows"].size(), 2u);
  EXPECT_EQ(k["rows"][0]["verdict"], "inconclusive");
  EXPECT_EQ(k["rows"][0]["repetitions"]["baseline"], 2);
  EXPECT_NE(k["rows"][0]["detail"].get<std::string>().find("needs 3"), std::string::npos);
}

// Runs are matched by name: one spec twice, or two specs of one name, are refused up front
// naming both files, before anything trains.
TEST_F(Cli, RunRefusesTwoSpecsOfOneName) {
  Result r = run("run " + tiny() + " " + tiny() + " --device reference --quiet");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("the same file twice"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  const std::string copy = (dir_ / "copy.json").string();
  fs::copy_file(tiny(), copy);
  r = run("run " + tiny() + " " + copy + " --device reference --quiet");
  EXPECT_EQ(r.code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("copy.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tiny_mlp.json"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;  // nothing trained
}

TEST_F(Cli, AutoDeviceSaysCpuInOneLine) {
  Result r = run("run " + tiny() + " --epochs 1 --precisions fp32");
  ASSERT_EQ(r.code, 0) << r.err;
  // On a machine without a GPU, one line says the CPU is used (then, off a terminal, the line of
  // the finished run).
  if (r.err.find("CPU") != std::string::npos) {
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;
    EXPECT_NE(r.err.find("\nmpbench: [1/1] "), std::string::npos) << r.err;
  }
  Result q = run("run " + tiny() + " --epochs 1 --precisions fp32 --quiet");
  EXPECT_EQ(q.code, 0);
  EXPECT_TRUE(q.err.empty()) << q.err;
  // Without a GPU, auto is the native CPU where there is one: it says so, and takes --threads.
  if (mpbench::cuda_device_count(nullptr) > 0 || !mpbench::native_cpu_available(nullptr)) return;
  EXPECT_NE(r.err.find("; running on the CPU (--device cpu)\n"), std::string::npos) << r.err;
  const fs::path json = dir_ / "t.json";
  const Result t = run("run " + tiny() +
                       " --epochs 1 --precisions fp32 --quiet --threads 1 --json " + json.string());
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_EQ(nlohmann::json::parse(read_file(json.string()))["env"]["native_cpu"]["threads"], 1);
}

// Overrides of 0 are overrides (the spec's seed is 1, its warm-up 10), and a run without
// --repeat has no repetition.
TEST_F(Cli, OverridesOfZeroAreKept) {
  const fs::path json = dir_ / "z.json";
  const Result r = run("run " + tiny() +
                       " --device reference --quiet --epochs 1 --precisions fp32 --seed 0 "
                       "--warmup 0 --json " +
                       json.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const auto j = nlohmann::json::parse(read_file(json.string()));
  EXPECT_EQ(j["specs"][0]["data"]["seed"], 0);
  EXPECT_EQ(j["specs"][0]["train"]["warmup_steps"], 0);
  EXPECT_EQ(j["runs"][0]["warmup_steps"], 0);
  EXPECT_FALSE(j["runs"][0].contains("repetition")) << j["runs"][0]["repetition"];
}

TEST_F(Cli, HeavySpecOnTheCpuGetsANote) {
  // ~5e14 training FLOPs: the note comes before the data is even made. A 1 MiB limit ends the run
  // at its first allocation (a `timeout 2` that cut it short failed on a busy machine).
  const std::string heavy =
      spec_file("heavy.json", R"({"name": "heavy", "model": {"type": "mlp", "input_dim": 256,
      "hidden": [8192, 8192], "num_classes": 4}, "data": {"train_samples": 100000,
      "eval_samples": 1000}, "train": {"batch_size": 1000, "epochs": 10},
      "precisions": ["fp32"]})");
  Result r = run("run " + heavy + " --device reference --memory-limit 1MiB");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("heavy trains"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("TFLOP"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("100 GFLOP/s; the CPU reference"), std::string::npos) << r.err;
  // The note's time is the FLOPs at the rate: 0.5 PFLOP at 100 GFLOP/s is 5e3 s, in minutes.
  double tflop = 0, minutes = 0;
  const size_t at = r.err.find("heavy trains ");
  ASSERT_EQ(
      std::sscanf(r.err.c_str() + at, "heavy trains %lf TFLOP%*[^,], %lf min", &tflop, &minutes), 2)
      << r.err;
  EXPECT_NEAR(minutes, tflop * 1e12 / 100e9 / 60, 1.0) << r.err;
  Result quiet = run("run " + heavy + " --device reference --memory-limit 1MiB --quiet");
  EXPECT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find("heavy trains"), std::string::npos) << quiet.err;
  Result small = run("run " + tiny() + " --device reference --epochs 1 --precisions fp32");
  EXPECT_EQ(small.code, 0) << small.err;
  EXPECT_EQ(small.err.find("TFLOP"), std::string::npos) << small.err;
  // The native CPU estimates from its measured GEMM rates, over the modes it runs (tf32 has no
  // path there: one mode of the two).
  if (!mpbench::native_cpu_available(nullptr)) return;
  Result native = run("run " + heavy + " --device cpu --precisions fp32,tf32 --memory-limit 1MiB");
  EXPECT_EQ(native.code, 0) << native.err;
  EXPECT_NE(native.err.find("heavy trains"), std::string::npos) << native.err;
  EXPECT_NE(native.err.find("over the 1 mode(s) this CPU runs, "), std::string::npos) << native.err;
  EXPECT_NE(native.err.find("at its measured GEMM rates (fp32 "), std::string::npos) << native.err;
  double rate = 0;
  const size_t nat = native.err.find("heavy trains ");
  ASSERT_EQ(
      std::sscanf(native.err.c_str() + nat,
                  "heavy trains %lf TFLOP%*[^,], %lf min at its measured GEMM rates (fp32 %lf",
                  &tflop, &minutes, &rate),
      3)
      << native.err;
  EXPECT_NEAR(minutes, tflop / rate / 60, 0.05 * minutes + 1) << native.err;
}

TEST_F(Cli, ProfileTimesEveryOpOfTheProfiledSteps) {
  fs::path json = dir_ / "p.json";
  Result r =
      run("profile " + tiny() + " --device reference --steps 3 --precision fp32,amp_fp16 --top 5" +
          " --json " + json.string() + " --quiet");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.err.empty()) << r.err;
  for (const char* part : {"3 steps profiled", "by layer", "by op", "fc1 fwd", "head bwd", "gemm"})
    EXPECT_NE(r.out.find(part), std::string::npos) << part << " in:\n" << r.out;
  auto j = nlohmann::json::parse(read_file(json.string()));
  ASSERT_EQ(j["profiles"].size(), 2u);
  EXPECT_EQ(j["env"]["device"], "reference");
  for (const auto& p : j["profiles"]) {
    EXPECT_EQ(p["status"], "ok");
    EXPECT_EQ(p["profiled_steps"], 3);
    EXPECT_GT(p["step_time_ms"].get<double>(), 0.0);
    double ms = 0;
    for (const auto& o : p["ops"]) ms += o["ms_per_step"].get<double>();
    EXPECT_GT(ms, 0.0);
  }
  EXPECT_EQ(j["profiles"][1]["precision"], "amp_fp16");
  // More steps than an epoch of the spec's data (32 batches): several epochs, no more data, and
  // exactly the steps asked for profiled (evaluations in between are not).
  Result many =
      run("profile " + tiny() + " --device reference --steps 40 --precision fp32 --quiet");
  ASSERT_EQ(many.code, 0) << many.err;
  EXPECT_NE(many.out.find("40 steps profiled"), std::string::npos) << many.out;
}

// Started by an MPI launcher (its environment), in a build without MPI: refused in one line,
// exit 2, instead of every rank training alone. Builds with MPI test the launch itself
// (tests/mpi/app/test_data_parallel.cpp).
TEST_F(Cli, AnMpiLaunchWithoutMpiIsRefusedInOneLine) {
#ifdef MPBENCH_HAVE_MPI
  GTEST_SKIP() << "this build has MPI";
#else
  const auto r = mpbench::test::run_shell(
      "OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 " + std::string(MPBENCH_EXE) + " run " +
          mpbench::test::source_dir() + "/configs/tiny_mlp.json --device reference --quiet",
      dir_.string());
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.err,
            "mpbench: launched by an MPI launcher, but this mpbench was built without MPI "
            "(MPBENCH_MPI=OFF or no libopenmpi-dev)\n");
  EXPECT_TRUE(r.out.empty());
#endif
}

// A run that shares its one CPU with a busy loop records how long its thread waited for it
// (host_load: about half of the time) and is flagged and noted busy, though its epochs may be as
// steady as a quiet run's; profile says so too. The loop ends on its own (timeout) should the
// test not get to end it.
TEST_F(Cli, ARunBesideABusyLoopOnItsCpuIsFlaggedBusy) {
  const std::string spec = spec_file("wide.json", R"({"name": "wide", "model": {"type": "mlp",
    "input_dim": 512, "hidden": [512, 512], "num_classes": 10}, "data": {"train_samples": 4096,
    "eval_samples": 128}, "train": {"batch_size": 128, "epochs": 4, "warmup_steps": 2}})");
  std::optional<mpbench::test::PinnedToOneCpu> pinned(std::in_place);  // the shell inherits it
  ASSERT_TRUE(pinned->ok());
  const auto beside_a_loop = [&](const std::string& args) {
    return mpbench::test::run_shell("{ timeout 120 sh -c 'while :; do :; done' & loop=$!; " +
                                        std::string(MPBENCH_EXE) + " " + args +
                                        " --device reference; rc=$?; kill $loop; exit $rc; }",
                                    dir_.string());
  };
  const Result r =
      beside_a_loop("run " + spec + " --precisions fp32 --json " + (dir_ / "out.json").string());
  const Result p = beside_a_loop("profile " + spec + " --steps 16 --quiet");
  pinned.reset();
  EXPECT_EQ(p.code, 0) << p.err;
  EXPECT_TRUE(has_text(p.out, "note: a busy machine: its 1 thread waited for a CPU ")) << p.out;
  ASSERT_EQ(r.code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(read_file((dir_ / "out.json").string()));
  const nlohmann::json& run = j["runs"][0];
  ASSERT_TRUE(run.contains("host_load")) << run.dump();
  const nlohmann::json& h = run["host_load"];
  EXPECT_EQ(h["cpus"], 1) << h;
  // The reference's threads are its BLAS's.
  EXPECT_EQ(h["threads"], std::max(1, j["env"]["cpu"]["blas_threads"].get<int>())) << j["env"];
  EXPECT_GE(h["seconds"].get<double>(), 0.1) << h;
  EXPECT_GE(h["waited_cpus"].get<double>(), 0.25) << h;
  EXPECT_LE(h["own_cpus"].get<double>(), 1.02) << h;
  EXPECT_NE(run["flags"].dump().find("\"busy\""), std::string::npos) << run["flags"];
  EXPECT_TRUE(has_text(r.out, "note: fp32: its 1 thread waited for a CPU ")) << r.out;
}
