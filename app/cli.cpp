// Command-line front end: CLI11 definitions of every subcommand, and the one place where errors
// become a single line on stderr and an exit code (0 ok, 1 regression, 2 bad input, 3 runtime).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <exception>
#include <iostream>
#include <set>
#include <string>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>

#include "app/commands.h"
#include "app/launch.h"
#include "app/output_file.h"
#include "kernels/error.h"
#include "models/spec.h"
#include "models/spec_reader.h"

namespace mpbench {

nlohmann::json tool_json() {
  return {{"name", "mpbench"}, {"version", MPBENCH_VERSION}, {"git", build_git_describe()}};
}

namespace {

// argv, kept by mpbench_main for provenance_json: the process's own, set once.
std::vector<std::string>& command_line() {
  static std::vector<std::string> argv;
  return argv;
}

// The commit of the git checkout the working directory is in, as CI tools record it; git's own
// answer (worktrees, packed refs), null where there is no git or no checkout.
nlohmann::json checkout_commit() {
  FILE* p = ::popen("git rev-parse --verify -q HEAD 2>/dev/null", "r");
  if (!p) return nullptr;
  char buf[128] = {};
  const bool got = std::fgets(buf, sizeof buf, p) != nullptr;
  const int rc = ::pclose(p);
  std::string s = got ? buf : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  if (rc != 0 || s.size() < 7 || s.find_first_not_of("0123456789abcdef") != std::string::npos)
    return nullptr;
  return s;
}

}  // namespace

nlohmann::json json_header(const char* kind) {
  return {{"schema_version", 1},
          {"kind", kind},
          {"tool", tool_json()},
          {"provenance", provenance_json()}};
}

std::string host_name() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return printable_line(host);
}

nlohmann::json provenance_json() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[32] = {};
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return {{"time_utc", when},
          {"host", host_name()},
          {"command", command_line()},
          {"commit", checkout_commit()}};
}

namespace {

// Each subcommand's --help shows its own examples; the top-level help shows them all.
const std::vector<std::pair<const char*, const char*>> kExamples = {
    {"run",
     "mpbench run configs/mnist_mlp.json                  compare all four modes on the default "
     "device"},
    {"run",
     "mpbench run configs/gpt2_small_layer.json --precisions amp_bf16,amp_fp8   FP8 (sm_89+) vs "
     "bf16"},
    {"run",
     "mpbench run configs/mnist_mlp.json --precisions fp32,amp_bf16 --epochs 2 --json out.json"},
    {"run",
     "mpbench run configs/tiny_*.json --device reference --csv results.csv --md results.md "
     "--quiet"},
    {"run", "mpbench run configs/resnet50_conv2.json configs/bert_base_layer.json --cuda-graphs"},
    {"run", "mpbench run configs/tiny_mlp.json --repeat 5 --json current.json   for compare"},
    {"profile",
     "mpbench profile configs/bert_base_layer.json --precision amp_bf16   where a step's time "
     "goes"},
    {"explain",
     "mpbench explain configs/gpt2_small_layer.json --precisions fp32,amp_bf16   why bf16 helped, "
     "or not"},
    {"maxbatch",
     "mpbench maxbatch configs/resnet50_conv2.json --memory-limit 16GiB --multiple 8   what fits a "
     "card"},
    {"validate",
     "mpbench validate configs/*.json                     check spec files without running them"},
    {"inspect",
     "mpbench inspect configs/gpt2_small_layer.json --precision amp_bf16   per-layer FLOPs, "
     "memory"},
    {"devices",
     "mpbench devices --json                              the GPU(s), versions and datasheet "
     "peaks"},
    {"compare", "mpbench compare baseline.json current.json --md summary.md   the CI gate"},
    {"report",
     "mpbench report results/h200/*.json --html report.html   charts of result files as one page"},
    {"data",
     "mpbench data configs/mnist_mlp.json --out /tmp/mnist   the exact dataset, for PyTorch"},
};

const char* kExitCodes =
    R"(Exit codes: 0 ok, 1 regression found (compare), 2 bad input, 3 runtime failure, 4 compare
could not judge (nothing matched, a spec changed; with --strict also inconclusive rows),
129 / 130 / 143 interrupted by SIGHUP / SIGINT / SIGTERM.
)";

// The examples of `command` ("" for all of them) and the exit codes.
std::string help_footer(const std::string& command) {
  std::string out = "\nExamples:\n";
  for (const auto& [name, line] : kExamples)
    if (command.empty() || command == name) out += std::string("  ") + line + "\n";
  return out + "\n" + kExitCodes;
}

// An empty path or list given on purpose (`--json ''`, `--precisions ''`) is an error, not the
// option left out: an unset option is simply not parsed.
const CLI::Validator kNonEmpty(
    [](std::string& s) { return s.empty() ? std::string("expected a value, got ''") : ""; }, "",
    "non-empty");

using spec_json::clip;

// A word after an option that reads as another option is one the user meant: CLI11 takes the word
// after `--json` as its value whatever it is, so `--json --quiet` wrote a file named "--quiet" and
// `compare ... --json --strict` lost --strict. A file's name may not start with '-' at all
// (./-q names such a file; '-' alone the outputs refuse by name); any other text value may not
// start with "--" (a negative number or "-fp32" gets its own option's message).
bool names_a_file(const CLI::Option& opt) {
  static const std::set<std::string> kFileOptions = {
      "--json", "--csv", "--md", "--html", "--junit", "--out", "--baseline", "--scaling-baseline"};
  return kFileOptions.count(opt.get_name()) > 0;
}
CLI::Validator not_an_option(bool file) {
  return CLI::Validator(
      [file](std::string& s) {
        if (s.size() < 2 || s[0] != '-' || (!file && s[1] != '-')) return std::string();
        return "expected a value, got the option '" + clip(s) + "'" +
               (file ? " (a file of that name: ./" + clip(s) + ")" : "");
      },
      "", "not-an-option");
}

// Numbers on the command line are plain decimal in every option: CLI11 reads integers with
// strtoll(s, 0), which takes "0x10" as 16 and "010" as 8. A sign, digits without a leading zero
// and, with `fraction`, a decimal part.
bool plain_decimal(const std::string& s, bool fraction) {
  size_t i = s.size() > 1 && s[0] == '-' ? 1 : 0;
  const size_t int_begin = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  const size_t int_digits = i - int_begin;
  if (int_digits == 0 || (int_digits > 1 && s[int_begin] == '0')) return false;
  if (fraction && i < s.size() && s[i] == '.') {
    const size_t frac_begin = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == frac_begin) return false;
  }
  return i == s.size();
}

// Applied to every numeric option of every subcommand, after its own checks.
const CLI::Validator kDecimalInteger(
    [](std::string& s) {
      return plain_decimal(s, false) ? std::string()
                                     : "expected a decimal integer, got '" + clip(s) + "'";
    },
    "", "decimal");
const CLI::Validator kDecimalNumber(
    [](std::string& s) {
      return plain_decimal(s, true) ? std::string()
                                    : "expected a decimal number, got '" + clip(s) + "'";
    },
    "", "decimal");

// "a, b" -> {"a", "b"}: blanks around an item are dropped; an item with a blank inside
// ("f p 3 2") is bad input, never read as "fp32".
std::vector<std::string> split_list(const std::string& option, const std::string& s) {
  std::vector<std::string> out;
  for (size_t start = 0;;) {
    const size_t comma = s.find(',', start);
    std::string item = s.substr(start, comma == std::string::npos ? comma : comma - start);
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    item = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    if (item.find_first_of(" \t\n\r\v\f") != std::string::npos)
      throw_bad_input(fmt::format(
          "{}: '{}' has a blank inside (expected items separated by commas)", option, clip(item)));
    if (item.empty())
      throw_bad_input(fmt::format("{}: '{}' has an empty item (expected items separated by commas)",
                                  option, clip(s)));
    out.push_back(std::move(item));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

const char* kCompareRule = R"(
Runs are matched by model, precision, device, cuda_graphs, batch size and seed (`run --seeds`).
The runs of one key are its repetitions: `run --repeat N` in one file, and those of every
--baseline file pooled. Time: the ratio (current / baseline) of the medians over repetitions of
each repetition's median epoch time, with a 95% hierarchical percentile bootstrap interval
(resample the repetitions, then the epochs within each; 2000 resamples, fixed seed: the output
is deterministic), so that it holds the noise between runs, not only between one run's epochs.
With threshold t:
  slower        CI lower bound > 1 and ratio > 1+t (significant and beyond the threshold)
  faster        CI upper bound < 1 and ratio < 1/(1+t)
  same          the whole CI within [1/(1+t), 1+t]
  inconclusive  anything else (noise), or fewer than 3 repetitions on a side (the row says how
                many it needs: run --repeat 5 is the CI recommendation)
  spec-changed  the resolved specs differ (the first differing JSON path is named): not compared
Memory (training peak: every category but the dataset copy), accuracy and final loss are
compared without an interval, over every repetition that trained: the largest peak, the median
accuracy and loss (a loss gone non-finite always regresses). A run that was ok and is now oom,
diverged or failed, in any of its repetitions, is a regression; runs on one side only are
listed as missing / new. The spec is checked against every baseline file. An environment
difference (GPU, driver, CUDA, cuDNN, CPU, BLAS threads and kernels) is named in its rows and
switches nothing off: every number is still compared, and under --strict the difference alone
fails (exit 4).

Exit codes: 0 no regression, 1 a regression (time, memory, accuracy, loss or status), 2 bad
input, 3 runtime failure, 4 nothing matched or a spec changed (unless a regression makes it 1),
or (--strict) no regression but inconclusive, missing or environment-changed rows.
)";

// The code points printable_line escapes besides ASCII's controls: Unicode 14.0's general
// categories Cc (the C1 controls), Cf (format: bidi embeddings, overrides and isolates, zero-width
// characters, the BOM), Zl and Zp (U+2028, U+2029: line breaks in some terminals and editors), Co
// (private use), Cs and Cn (unassigned and noncharacters). Boundaries: a code point c is escaped
// when an odd number of entries are <= c. Generated by
//   import unicodedata
//   def esc(c): return 0x80 <= c < 0x110000 and unicodedata.category(chr(c)) in (
//       'Cc', 'Cf', 'Co', 'Cs', 'Cn', 'Zl', 'Zp')
//   print(', '.join(hex(c) for c in range(0x80, 0x110001) if esc(c) != esc(c - 1)))
constexpr uint32_t kEscapedBounds[] = {
    0x80,    0xa0,    0xad,    0xae,    0x378,   0x37a,   0x380,   0x384,   0x38b,   0x38c,
    0x38d,   0x38e,   0x3a2,   0x3a3,   0x530,   0x531,   0x557,   0x559,   0x58b,   0x58d,
    0x590,   0x591,   0x5c8,   0x5d0,   0x5eb,   0x5ef,   0x5f5,   0x606,   0x61c,   0x61d,
    0x6dd,   0x6de,   0x70e,   0x710,   0x74b,   0x74d,   0x7b2,   0x7c0,   0x7fb,   0x7fd,
    0x82e,   0x830,   0x83f,   0x840,   0x85c,   0x85e,   0x85f,   0x860,   0x86b,   0x870,
    0x88f,   0x898,   0x8e2,   0x8e3,   0x984,   0x985,   0x98d,   0x98f,   0x991,   0x993,
    0x9a9,   0x9aa,   0x9b1,   0x9b2,   0x9b3,   0x9b6,   0x9ba,   0x9bc,   0x9c5,   0x9c7,
    0x9c9,   0x9cb,   0x9cf,   0x9d7,   0x9d8,   0x9dc,   0x9de,   0x9df,   0x9e4,   0x9e6,
    0x9ff,   0xa01,   0xa04,   0xa05,   0xa0b,   0xa0f,   0xa11,   0xa13,   0xa29,   0xa2a,
    0xa31,   0xa32,   0xa34,   0xa35,   0xa37,   0xa38,   0xa3a,   0xa3c,   0xa3d,   0xa3e,
    0xa43,   0xa47,   0xa49,   0xa4b,   0xa4e,   0xa51,   0xa52,   0xa59,   0xa5d,   0xa5e,
    0xa5f,   0xa66,   0xa77,   0xa81,   0xa84,   0xa85,   0xa8e,   0xa8f,   0xa92,   0xa93,
    0xaa9,   0xaaa,   0xab1,   0xab2,   0xab4,   0xab5,   0xaba,   0xabc,   0xac6,   0xac7,
    0xaca,   0xacb,   0xace,   0xad0,   0xad1,   0xae0,   0xae4,   0xae6,   0xaf2,   0xaf9,
    0xb00,   0xb01,   0xb04,   0xb05,   0xb0d,   0xb0f,   0xb11,   0xb13,   0xb29,   0xb2a,
    0xb31,   0xb32,   0xb34,   0xb35,   0xb3a,   0xb3c,   0xb45,   0xb47,   0xb49,   0xb4b,
    0xb4e,   0xb55,   0xb58,   0xb5c,   0xb5e,   0xb5f,   0xb64,   0xb66,   0xb78,   0xb82,
    0xb84,   0xb85,   0xb8b,   0xb8e,   0xb91,   0xb92,   0xb96,   0xb99,   0xb9b,   0xb9c,
    0xb9d,   0xb9e,   0xba0,   0xba3,   0xba5,   0xba8,   0xbab,   0xbae,   0xbba,   0xbbe,
    0xbc3,   0xbc6,   0xbc9,   0xbca,   0xbce,   0xbd0,   0xbd1,   0xbd7,   0xbd8,   0xbe6,
    0xbfb,   0xc00,   0xc0d,   0xc0e,   0xc11,   0xc12,   0xc29,   0xc2a,   0xc3a,   0xc3c,
    0xc45,   0xc46,   0xc49,   0xc4a,   0xc4e,   0xc55,   0xc57,   0xc58,   0xc5b,   0xc5d,
    0xc5e,   0xc60,   0xc64,   0xc66,   0xc70,   0xc77,   0xc8d,   0xc8e,   0xc91,   0xc92,
    0xca9,   0xcaa,   0xcb4,   0xcb5,   0xcba,   0xcbc,   0xcc5,   0xcc6,   0xcc9,   0xcca,
    0xcce,   0xcd5,   0xcd7,   0xcdd,   0xcdf,   0xce0,   0xce4,   0xce6,   0xcf0,   0xcf1,
    0xcf3,   0xd00,   0xd0d,   0xd0e,   0xd11,   0xd12,   0xd45,   0xd46,   0xd49,   0xd4a,
    0xd50,   0xd54,   0xd64,   0xd66,   0xd80,   0xd81,   0xd84,   0xd85,   0xd97,   0xd9a,
    0xdb2,   0xdb3,   0xdbc,   0xdbd,   0xdbe,   0xdc0,   0xdc7,   0xdca,   0xdcb,   0xdcf,
    0xdd5,   0xdd6,   0xdd7,   0xdd8,   0xde0,   0xde6,   0xdf0,   0xdf2,   0xdf5,   0xe01,
    0xe3b,   0xe3f,   0xe5c,   0xe81,   0xe83,   0xe84,   0xe85,   0xe86,   0xe8b,   0xe8c,
    0xea4,   0xea5,   0xea6,   0xea7,   0xebe,   0xec0,   0xec5,   0xec6,   0xec7,   0xec8,
    0xece,   0xed0,   0xeda,   0xedc,   0xee0,   0xf00,   0xf48,   0xf49,   0xf6d,   0xf71,
    0xf98,   0xf99,   0xfbd,   0xfbe,   0xfcd,   0xfce,   0xfdb,   0x1000,  0x10c6,  0x10c7,
    0x10c8,  0x10cd,  0x10ce,  0x10d0,  0x1249,  0x124a,  0x124e,  0x1250,  0x1257,  0x1258,
    0x1259,  0x125a,  0x125e,  0x1260,  0x1289,  0x128a,  0x128e,  0x1290,  0x12b1,  0x12b2,
    0x12b6,  0x12b8,  0x12bf,  0x12c0,  0x12c1,  0x12c2,  0x12c6,  0x12c8,  0x12d7,  0x12d8,
    0x1311,  0x1312,  0x1316,  0x1318,  0x135b,  0x135d,  0x137d,  0x1380,  0x139a,  0x13a0,
    0x13f6,  0x13f8,  0x13fe,  0x1400,  0x169d,  0x16a0,  0x16f9,  0x1700,  0x1716,  0x171f,
    0x1737,  0x1740,  0x1754,  0x1760,  0x176d,  0x176e,  0x1771,  0x1772,  0x1774,  0x1780,
    0x17de,  0x17e0,  0x17ea,  0x17f0,  0x17fa,  0x1800,  0x180e,  0x180f,  0x181a,  0x1820,
    0x1879,  0x1880,  0x18ab,  0x18b0,  0x18f6,  0x1900,  0x191f,  0x1920,  0x192c,  0x1930,
    0x193c,  0x1940,  0x1941,  0x1944,  0x196e,  0x1970,  0x1975,  0x1980,  0x19ac,  0x19b0,
    0x19ca,  0x19d0,  0x19db,  0x19de,  0x1a1c,  0x1a1e,  0x1a5f,  0x1a60,  0x1a7d,  0x1a7f,
    0x1a8a,  0x1a90,  0x1a9a,  0x1aa0,  0x1aae,  0x1ab0,  0x1acf,  0x1b00,  0x1b4d,  0x1b50,
    0x1b7f,  0x1b80,  0x1bf4,  0x1bfc,  0x1c38,  0x1c3b,  0x1c4a,  0x1c4d,  0x1c89,  0x1c90,
    0x1cbb,  0x1cbd,  0x1cc8,  0x1cd0,  0x1cfb,  0x1d00,  0x1f16,  0x1f18,  0x1f1e,  0x1f20,
    0x1f46,  0x1f48,  0x1f4e,  0x1f50,  0x1f58,  0x1f59,  0x1f5a,  0x1f5b,  0x1f5c,  0x1f5d,
    0x1f5e,  0x1f5f,  0x1f7e,  0x1f80,  0x1fb5,  0x1fb6,  0x1fc5,  0x1fc6,  0x1fd4,  0x1fd6,
    0x1fdc,  0x1fdd,  0x1ff0,  0x1ff2,  0x1ff5,  0x1ff6,  0x1fff,  0x2000,  0x200b,  0x2010,
    0x2028,  0x202f,  0x2060,  0x2070,  0x2072,  0x2074,  0x208f,  0x2090,  0x209d,  0x20a0,
    0x20c1,  0x20d0,  0x20f1,  0x2100,  0x218c,  0x2190,  0x2427,  0x2440,  0x244b,  0x2460,
    0x2b74,  0x2b76,  0x2b96,  0x2b97,  0x2cf4,  0x2cf9,  0x2d26,  0x2d27,  0x2d28,  0x2d2d,
    0x2d2e,  0x2d30,  0x2d68,  0x2d6f,  0x2d71,  0x2d7f,  0x2d97,  0x2da0,  0x2da7,  0x2da8,
    0x2daf,  0x2db0,  0x2db7,  0x2db8,  0x2dbf,  0x2dc0,  0x2dc7,  0x2dc8,  0x2dcf,  0x2dd0,
    0x2dd7,  0x2dd8,  0x2ddf,  0x2de0,  0x2e5e,  0x2e80,  0x2e9a,  0x2e9b,  0x2ef4,  0x2f00,
    0x2fd6,  0x2ff0,  0x2ffc,  0x3000,  0x3040,  0x3041,  0x3097,  0x3099,  0x3100,  0x3105,
    0x3130,  0x3131,  0x318f,  0x3190,  0x31e4,  0x31f0,  0x321f,  0x3220,  0xa48d,  0xa490,
    0xa4c7,  0xa4d0,  0xa62c,  0xa640,  0xa6f8,  0xa700,  0xa7cb,  0xa7d0,  0xa7d2,  0xa7d3,
    0xa7d4,  0xa7d5,  0xa7da,  0xa7f2,  0xa82d,  0xa830,  0xa83a,  0xa840,  0xa878,  0xa880,
    0xa8c6,  0xa8ce,  0xa8da,  0xa8e0,  0xa954,  0xa95f,  0xa97d,  0xa980,  0xa9ce,  0xa9cf,
    0xa9da,  0xa9de,  0xa9ff,  0xaa00,  0xaa37,  0xaa40,  0xaa4e,  0xaa50,  0xaa5a,  0xaa5c,
    0xaac3,  0xaadb,  0xaaf7,  0xab01,  0xab07,  0xab09,  0xab0f,  0xab11,  0xab17,  0xab20,
    0xab27,  0xab28,  0xab2f,  0xab30,  0xab6c,  0xab70,  0xabee,  0xabf0,  0xabfa,  0xac00,
    0xd7a4,  0xd7b0,  0xd7c7,  0xd7cb,  0xd7fc,  0xf900,  0xfa6e,  0xfa70,  0xfada,  0xfb00,
    0xfb07,  0xfb13,  0xfb18,  0xfb1d,  0xfb37,  0xfb38,  0xfb3d,  0xfb3e,  0xfb3f,  0xfb40,
    0xfb42,  0xfb43,  0xfb45,  0xfb46,  0xfbc3,  0xfbd3,  0xfd90,  0xfd92,  0xfdc8,  0xfdcf,
    0xfdd0,  0xfdf0,  0xfe1a,  0xfe20,  0xfe53,  0xfe54,  0xfe67,  0xfe68,  0xfe6c,  0xfe70,
    0xfe75,  0xfe76,  0xfefd,  0xff01,  0xffbf,  0xffc2,  0xffc8,  0xffca,  0xffd0,  0xffd2,
    0xffd8,  0xffda,  0xffdd,  0xffe0,  0xffe7,  0xffe8,  0xffef,  0xfffc,  0xfffe,  0x10000,
    0x1000c, 0x1000d, 0x10027, 0x10028, 0x1003b, 0x1003c, 0x1003e, 0x1003f, 0x1004e, 0x10050,
    0x1005e, 0x10080, 0x100fb, 0x10100, 0x10103, 0x10107, 0x10134, 0x10137, 0x1018f, 0x10190,
    0x1019d, 0x101a0, 0x101a1, 0x101d0, 0x101fe, 0x10280, 0x1029d, 0x102a0, 0x102d1, 0x102e0,
    0x102fc, 0x10300, 0x10324, 0x1032d, 0x1034b, 0x10350, 0x1037b, 0x10380, 0x1039e, 0x1039f,
    0x103c4, 0x103c8, 0x103d6, 0x10400, 0x1049e, 0x104a0, 0x104aa, 0x104b0, 0x104d4, 0x104d8,
    0x104fc, 0x10500, 0x10528, 0x10530, 0x10564, 0x1056f, 0x1057b, 0x1057c, 0x1058b, 0x1058c,
    0x10593, 0x10594, 0x10596, 0x10597, 0x105a2, 0x105a3, 0x105b2, 0x105b3, 0x105ba, 0x105bb,
    0x105bd, 0x10600, 0x10737, 0x10740, 0x10756, 0x10760, 0x10768, 0x10780, 0x10786, 0x10787,
    0x107b1, 0x107b2, 0x107bb, 0x10800, 0x10806, 0x10808, 0x10809, 0x1080a, 0x10836, 0x10837,
    0x10839, 0x1083c, 0x1083d, 0x1083f, 0x10856, 0x10857, 0x1089f, 0x108a7, 0x108b0, 0x108e0,
    0x108f3, 0x108f4, 0x108f6, 0x108fb, 0x1091c, 0x1091f, 0x1093a, 0x1093f, 0x10940, 0x10980,
    0x109b8, 0x109bc, 0x109d0, 0x109d2, 0x10a04, 0x10a05, 0x10a07, 0x10a0c, 0x10a14, 0x10a15,
    0x10a18, 0x10a19, 0x10a36, 0x10a38, 0x10a3b, 0x10a3f, 0x10a49, 0x10a50, 0x10a59, 0x10a60,
    0x10aa0, 0x10ac0, 0x10ae7, 0x10aeb, 0x10af7, 0x10b00, 0x10b36, 0x10b39, 0x10b56, 0x10b58,
    0x10b73, 0x10b78, 0x10b92, 0x10b99, 0x10b9d, 0x10ba9, 0x10bb0, 0x10c00, 0x10c49, 0x10c80,
    0x10cb3, 0x10cc0, 0x10cf3, 0x10cfa, 0x10d28, 0x10d30, 0x10d3a, 0x10e60, 0x10e7f, 0x10e80,
    0x10eaa, 0x10eab, 0x10eae, 0x10eb0, 0x10eb2, 0x10f00, 0x10f28, 0x10f30, 0x10f5a, 0x10f70,
    0x10f8a, 0x10fb0, 0x10fcc, 0x10fe0, 0x10ff7, 0x11000, 0x1104e, 0x11052, 0x11076, 0x1107f,
    0x110bd, 0x110be, 0x110c3, 0x110d0, 0x110e9, 0x110f0, 0x110fa, 0x11100, 0x11135, 0x11136,
    0x11148, 0x11150, 0x11177, 0x11180, 0x111e0, 0x111e1, 0x111f5, 0x11200, 0x11212, 0x11213,
    0x1123f, 0x11280, 0x11287, 0x11288, 0x11289, 0x1128a, 0x1128e, 0x1128f, 0x1129e, 0x1129f,
    0x112aa, 0x112b0, 0x112eb, 0x112f0, 0x112fa, 0x11300, 0x11304, 0x11305, 0x1130d, 0x1130f,
    0x11311, 0x11313, 0x11329, 0x1132a, 0x11331, 0x11332, 0x11334, 0x11335, 0x1133a, 0x1133b,
    0x11345, 0x11347, 0x11349, 0x1134b, 0x1134e, 0x11350, 0x11351, 0x11357, 0x11358, 0x1135d,
    0x11364, 0x11366, 0x1136d, 0x11370, 0x11375, 0x11400, 0x1145c, 0x1145d, 0x11462, 0x11480,
    0x114c8, 0x114d0, 0x114da, 0x11580, 0x115b6, 0x115b8, 0x115de, 0x11600, 0x11645, 0x11650,
    0x1165a, 0x11660, 0x1166d, 0x11680, 0x116ba, 0x116c0, 0x116ca, 0x11700, 0x1171b, 0x1171d,
    0x1172c, 0x11730, 0x11747, 0x11800, 0x1183c, 0x118a0, 0x118f3, 0x118ff, 0x11907, 0x11909,
    0x1190a, 0x1190c, 0x11914, 0x11915, 0x11917, 0x11918, 0x11936, 0x11937, 0x11939, 0x1193b,
    0x11947, 0x11950, 0x1195a, 0x119a0, 0x119a8, 0x119aa, 0x119d8, 0x119da, 0x119e5, 0x11a00,
    0x11a48, 0x11a50, 0x11aa3, 0x11ab0, 0x11af9, 0x11c00, 0x11c09, 0x11c0a, 0x11c37, 0x11c38,
    0x11c46, 0x11c50, 0x11c6d, 0x11c70, 0x11c90, 0x11c92, 0x11ca8, 0x11ca9, 0x11cb7, 0x11d00,
    0x11d07, 0x11d08, 0x11d0a, 0x11d0b, 0x11d37, 0x11d3a, 0x11d3b, 0x11d3c, 0x11d3e, 0x11d3f,
    0x11d48, 0x11d50, 0x11d5a, 0x11d60, 0x11d66, 0x11d67, 0x11d69, 0x11d6a, 0x11d8f, 0x11d90,
    0x11d92, 0x11d93, 0x11d99, 0x11da0, 0x11daa, 0x11ee0, 0x11ef9, 0x11fb0, 0x11fb1, 0x11fc0,
    0x11ff2, 0x11fff, 0x1239a, 0x12400, 0x1246f, 0x12470, 0x12475, 0x12480, 0x12544, 0x12f90,
    0x12ff3, 0x13000, 0x1342f, 0x14400, 0x14647, 0x16800, 0x16a39, 0x16a40, 0x16a5f, 0x16a60,
    0x16a6a, 0x16a6e, 0x16abf, 0x16ac0, 0x16aca, 0x16ad0, 0x16aee, 0x16af0, 0x16af6, 0x16b00,
    0x16b46, 0x16b50, 0x16b5a, 0x16b5b, 0x16b62, 0x16b63, 0x16b78, 0x16b7d, 0x16b90, 0x16e40,
    0x16e9b, 0x16f00, 0x16f4b, 0x16f4f, 0x16f88, 0x16f8f, 0x16fa0, 0x16fe0, 0x16fe5, 0x16ff0,
    0x16ff2, 0x17000, 0x187f8, 0x18800, 0x18cd6, 0x18d00, 0x18d09, 0x1aff0, 0x1aff4, 0x1aff5,
    0x1affc, 0x1affd, 0x1afff, 0x1b000, 0x1b123, 0x1b150, 0x1b153, 0x1b164, 0x1b168, 0x1b170,
    0x1b2fc, 0x1bc00, 0x1bc6b, 0x1bc70, 0x1bc7d, 0x1bc80, 0x1bc89, 0x1bc90, 0x1bc9a, 0x1bc9c,
    0x1bca0, 0x1cf00, 0x1cf2e, 0x1cf30, 0x1cf47, 0x1cf50, 0x1cfc4, 0x1d000, 0x1d0f6, 0x1d100,
    0x1d127, 0x1d129, 0x1d173, 0x1d17b, 0x1d1eb, 0x1d200, 0x1d246, 0x1d2e0, 0x1d2f4, 0x1d300,
    0x1d357, 0x1d360, 0x1d379, 0x1d400, 0x1d455, 0x1d456, 0x1d49d, 0x1d49e, 0x1d4a0, 0x1d4a2,
    0x1d4a3, 0x1d4a5, 0x1d4a7, 0x1d4a9, 0x1d4ad, 0x1d4ae, 0x1d4ba, 0x1d4bb, 0x1d4bc, 0x1d4bd,
    0x1d4c4, 0x1d4c5, 0x1d506, 0x1d507, 0x1d50b, 0x1d50d, 0x1d515, 0x1d516, 0x1d51d, 0x1d51e,
    0x1d53a, 0x1d53b, 0x1d53f, 0x1d540, 0x1d545, 0x1d546, 0x1d547, 0x1d54a, 0x1d551, 0x1d552,
    0x1d6a6, 0x1d6a8, 0x1d7cc, 0x1d7ce, 0x1da8c, 0x1da9b, 0x1daa0, 0x1daa1, 0x1dab0, 0x1df00,
    0x1df1f, 0x1e000, 0x1e007, 0x1e008, 0x1e019, 0x1e01b, 0x1e022, 0x1e023, 0x1e025, 0x1e026,
    0x1e02b, 0x1e100, 0x1e12d, 0x1e130, 0x1e13e, 0x1e140, 0x1e14a, 0x1e14e, 0x1e150, 0x1e290,
    0x1e2af, 0x1e2c0, 0x1e2fa, 0x1e2ff, 0x1e300, 0x1e7e0, 0x1e7e7, 0x1e7e8, 0x1e7ec, 0x1e7ed,
    0x1e7ef, 0x1e7f0, 0x1e7ff, 0x1e800, 0x1e8c5, 0x1e8c7, 0x1e8d7, 0x1e900, 0x1e94c, 0x1e950,
    0x1e95a, 0x1e95e, 0x1e960, 0x1ec71, 0x1ecb5, 0x1ed01, 0x1ed3e, 0x1ee00, 0x1ee04, 0x1ee05,
    0x1ee20, 0x1ee21, 0x1ee23, 0x1ee24, 0x1ee25, 0x1ee27, 0x1ee28, 0x1ee29, 0x1ee33, 0x1ee34,
    0x1ee38, 0x1ee39, 0x1ee3a, 0x1ee3b, 0x1ee3c, 0x1ee42, 0x1ee43, 0x1ee47, 0x1ee48, 0x1ee49,
    0x1ee4a, 0x1ee4b, 0x1ee4c, 0x1ee4d, 0x1ee50, 0x1ee51, 0x1ee53, 0x1ee54, 0x1ee55, 0x1ee57,
    0x1ee58, 0x1ee59, 0x1ee5a, 0x1ee5b, 0x1ee5c, 0x1ee5d, 0x1ee5e, 0x1ee5f, 0x1ee60, 0x1ee61,
    0x1ee63, 0x1ee64, 0x1ee65, 0x1ee67, 0x1ee6b, 0x1ee6c, 0x1ee73, 0x1ee74, 0x1ee78, 0x1ee79,
    0x1ee7d, 0x1ee7e, 0x1ee7f, 0x1ee80, 0x1ee8a, 0x1ee8b, 0x1ee9c, 0x1eea1, 0x1eea4, 0x1eea5,
    0x1eeaa, 0x1eeab, 0x1eebc, 0x1eef0, 0x1eef2, 0x1f000, 0x1f02c, 0x1f030, 0x1f094, 0x1f0a0,
    0x1f0af, 0x1f0b1, 0x1f0c0, 0x1f0c1, 0x1f0d0, 0x1f0d1, 0x1f0f6, 0x1f100, 0x1f1ae, 0x1f1e6,
    0x1f203, 0x1f210, 0x1f23c, 0x1f240, 0x1f249, 0x1f250, 0x1f252, 0x1f260, 0x1f266, 0x1f300,
    0x1f6d8, 0x1f6dd, 0x1f6ed, 0x1f6f0, 0x1f6fd, 0x1f700, 0x1f774, 0x1f780, 0x1f7d9, 0x1f7e0,
    0x1f7ec, 0x1f7f0, 0x1f7f1, 0x1f800, 0x1f80c, 0x1f810, 0x1f848, 0x1f850, 0x1f85a, 0x1f860,
    0x1f888, 0x1f890, 0x1f8ae, 0x1f8b0, 0x1f8b2, 0x1f900, 0x1fa54, 0x1fa60, 0x1fa6e, 0x1fa70,
    0x1fa75, 0x1fa78, 0x1fa7d, 0x1fa80, 0x1fa87, 0x1fa90, 0x1faad, 0x1fab0, 0x1fabb, 0x1fac0,
    0x1fac6, 0x1fad0, 0x1fada, 0x1fae0, 0x1fae8, 0x1faf0, 0x1faf7, 0x1fb00, 0x1fb93, 0x1fb94,
    0x1fbcb, 0x1fbf0, 0x1fbfa, 0x20000, 0x2a6e0, 0x2a700, 0x2b739, 0x2b740, 0x2b81e, 0x2b820,
    0x2cea2, 0x2ceb0, 0x2ebe1, 0x2f800, 0x2fa1e, 0x30000, 0x3134b, 0xe0100, 0xe01f0, 0x110000};

bool escaped_code_point(uint32_t cp) {
  const auto* end = std::end(kEscapedBounds);
  return (std::upper_bound(std::begin(kEscapedBounds), end, cp) - std::begin(kEscapedBounds)) % 2;
}

// A message longer than this (a list of every layer) is cut, saying so, the note included.
constexpr size_t kMaxLineBytes = 2000;
constexpr size_t kCutNoteRoom = 64;  // " ... (cut: N of M bytes shown)" and one last escape

// Every word (a run without spaces: an argument, a path, a value) of more than kMaxQuoted bytes
// cut to its start and "...": a 100 KB argument is not echoed whole. A word the spec reader cut
// already ("kkk...:") stays as it is.
std::string clip_words(const std::string& s) {
  constexpr size_t kSlack = 16;  // room for what follows a cut word: "...", a colon, quotes
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    const size_t end = std::min(s.find(' ', i), s.size());
    out += end - i > spec_json::kMaxQuoted + kSlack ? clip(s.substr(i, end - i))
                                                    : s.substr(i, end - i);
    if (end < s.size()) out += ' ';
    i = end + 1;
  }
  return out;
}

}  // namespace

std::string printable_line(const std::string& message) {
  const std::string s = clip_words(message);
  std::string out;
  out.reserve(std::min(s.size(), kMaxLineBytes + 64));
  const auto escape = [&](unsigned char c) {
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += fmt::format("\\x{:02x}", c);
    }
  };
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    if (out.size() >= kMaxLineBytes - kCutNoteRoom) {
      out += fmt::format(" ... (cut: {} of {} bytes shown)", i, n);
      break;
    }
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 || c == 0x7f) {
        escape(c);
      } else {
        out += static_cast<char>(c);
      }
      ++i;
      continue;
    }
    // A well-formed UTF-8 sequence (no overlong forms, surrogates or code points past
    // U+10FFFF) is kept, or written \u{XXXX} where kEscapedBounds says so; every other byte is
    // escaped.
    const int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
    uint32_t cp = len == 4 ? c & 0x07u : len == 3 ? c & 0x0fu : c & 0x1fu;
    bool ok = len > 0 && i + len <= n;
    for (int k = 1; ok && k < len; ++k) {
      ok = (p[i + k] & 0xc0) == 0x80;
      cp = (cp << 6) | (p[i + k] & 0x3fu);
    }
    static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    ok = ok && cp >= kMin[len] && cp <= 0x10ffff && !(cp >= 0xd800 && cp <= 0xdfff);
    if (!ok) {
      escape(c);
      ++i;
      continue;
    }
    if (escaped_code_point(cp)) {
      out += fmt::format("\\u{{{:04X}}}", cp);
    } else {
      out.append(s, i, static_cast<size_t>(len));
    }
    i += static_cast<size_t>(len);
  }
  return out;
}

std::vector<int64_t> parse_batch_sizes(const std::string& option, const std::string& text) {
  std::vector<int64_t> out;
  for (const std::string& item : split_list(option, text)) {
    const bool digits = item.size() <= 7 && plain_decimal(item, false) && item[0] != '-';
    const int64_t v = digits ? std::stoll(item) : 0;
    if (v < 1 || v > kMaxBatchSize)
      throw_bad_input(
          fmt::format("{}: expected batch sizes from 1 to {} separated by commas, got "
                      "'{}'",
                      option, kMaxBatchSize, clip(item)));
    if (std::find(out.begin(), out.end(), v) != out.end())
      throw_bad_input(fmt::format("{}: batch size {} is given twice", option, v));
    out.push_back(v);
  }
  return out;
}

uint64_t parse_memory_size(const std::string& option, const std::string& given) {
  static const std::pair<const char*, uint64_t> kUnits[] = {
      {"KiB", 1024},       {"MiB", 1048576},      {"GiB", 1073741824},
      {"TiB", 1ull << 40}, {"KB", 1000},          {"MB", 1000000},
      {"GB", 1000000000},  {"TB", 1000000000000}, {"B", 1}};
  const auto bad = [&](const char* why) {
    throw_bad_input(fmt::format(
        "{}: expected a size such as 16GiB, 512MiB, 4GB or a number of bytes{}, got '{}' (units: "
        "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)",
        option, why, clip(given)));
  };
  // Spaces around the size are the shell's quoting, not part of it; between number and unit
  // they are allowed ("16 GiB").
  const size_t first = given.find_first_not_of(' '), last = given.find_last_not_of(' ');
  const std::string text = first == std::string::npos ? "" : given.substr(first, last - first + 1);
  size_t end = text.size();
  uint64_t unit = 1;
  bool suffix = false;
  for (const auto& [name, factor] : kUnits) {
    const size_t n = std::strlen(name);
    if (text.size() > n && text.compare(text.size() - n, n, name) == 0) {
      end = text.size() - n;
      unit = factor;
      suffix = true;
      break;
    }
  }
  std::string number = text.substr(0, end);
  while (!number.empty() && number.back() == ' ') number.pop_back();
  // Plain decimal, and a decimal point only before a unit: "1.5GiB" is a size, "1.5" bytes is not.
  if (!plain_decimal(number, suffix) || number[0] == '-') bad("");
  const size_t dot = number.find('.');
  const std::string whole = number.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : number.substr(dot + 1);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  // Exactly, in integers: whole x unit + (frac / 10^digits) x unit, which must be whole bytes
  // ("1.5B" is not 1 byte). 20 digits are beyond 2^64 bytes already; a fraction of more than 30
  // digits is finer than a byte of any unit (2^-30 has 30).
  using U128 = unsigned __int128;
  if (whole.size() > 20) bad("");
  if (frac.size() > 30) bad(" (whole bytes)");
  U128 w = 0, f = 0, den = 1;
  for (char c : whole) w = w * 10 + static_cast<unsigned>(c - '0');
  for (char c : frac) {
    f = f * 10 + static_cast<unsigned>(c - '0');
    den *= 10;
  }
  U128 a = den, b = unit;  // gcd
  while (b != 0) {
    const U128 r = a % b;
    a = b;
    b = r;
  }
  const U128 den_left = den / a, unit_left = static_cast<U128>(unit) / a;
  if (f % den_left != 0) bad(" (whole bytes)");
  const U128 bytes = w * unit + f / den_left * unit_left;
  if (bytes < 1 || bytes > std::numeric_limits<uint64_t>::max()) bad("");
  return static_cast<uint64_t>(bytes);
}

int mpbench_main(int argc, char** argv) {
  install_interrupt_handlers();
  // Under a launcher from the start: it may end this rank for another that failed (and said
  // why) at any moment, before this one has parsed its arguments or joined the job.
  if (mpi_launcher()) quiet_launcher_signals();
  command_line().assign(argv, argv + argc);
  CLI::App app{
      "mpbench: what mixed precision (TF32, FP16, BF16, FP8) buys over FP32 for your model's "
      "shapes on your GPU (or CPU): time per epoch, peak memory, final accuracy, and why."};
  app.set_version_flag(
      "--version", std::string("mpbench ") + MPBENCH_VERSION + " (" + build_git_describe() + ")");
  app.require_subcommand(1);

  // The one --device of every command that trains.
  auto add_device_option = [](CLI::App* cmd, DeviceChoice& device) {
    cmd->add_option("--device", device.name,
                    "auto (the GPU if there is one, else the CPU), cuda, cpu (native: oneDNN, "
                    "fp32 and amp_bf16 on the CPU's own bf16 hardware), or reference (every "
                    "mode's numerics emulated exactly on the CPU; its times mean nothing)")
        ->check(CLI::IsMember({"auto", "cpu", "reference", "cuda"}))
        ->default_val("auto");
    cmd->add_option("--threads", device.threads,
                    "Threads of the native CPU backend (default: one per physical core; more than "
                    "the CPUs this process may run on make every op wait, and are warned of)")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--cpu-isa", device.cpu_isa,
                    "Cap the native CPU backend's instruction set (oneDNN's "
                    "ONEDNN_MAX_CPU_ISA): avx2, avx512_core (bf16 converted in software), "
                    "avx512_core_bf16 (AVX512-BF16, no AMX), avx512_core_amx, all");
  };

  // Data parallel's options, for the commands that train under mpirun or srun.
  auto add_data_parallel_options = [](CLI::App* cmd, RunArgs& args) {
    cmd->add_option("--grad-reduce", args.grad_reduce,
                    "Data parallel (under mpirun or srun): the dtype the gradients are averaged "
                    "in across ranks. fp32 (default, as PyTorch's DDP), or bf16 / fp16: cast, "
                    "summed in 16 bits, cast back, as DDP's bf16_compress_hook (half the bytes)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
    cmd->add_option("--bucket-mb", args.bucket_mb,
                    "Data parallel: the gradients are all-reduced in buckets of this many MiB of "
                    "fp32 gradients (default 25, as DDP; fractions allowed, down to 1 KiB), each "
                    "started as soon as the backward has made it")
        ->check(CLI::Range(1.0 / 1024, 65536.0));
  };

  RunArgs run;
  std::string precisions;
  auto* run_cmd = app.add_subcommand(
      "run", "Train each spec's model in each precision mode and print the comparison table");
  run_cmd->add_option("spec", run.specs, "Model spec JSON file(s)")->required();
  add_device_option(run_cmd, run.device);
  // --precision too, since inspect takes one mode under that name and people type either.
  run_cmd->add_option("--precisions,--precision", precisions,
                      "Comma-separated modes: fp32,tf32,amp_fp16,amp_bf16,amp_fp8 (default: the "
                      "spec's; amp_fp8, FP8 GEMMs as Transformer Engine's recipe, only when "
                      "listed)");
  run_cmd->add_option("--epochs", run.epochs, "Override the spec's epochs")
      ->check(CLI::Range(int64_t{1}, int64_t{10000}));
  std::string run_batch_sizes;
  auto* batch_sizes_opt = run_cmd->add_option(
      "--batch-sizes", run_batch_sizes,
      "A sweep: train each spec at each of these batch sizes (e.g. 32,64,128,256); the table and "
      "the report give the speedup over fp32 at each");
  // --warmup on run, profile and explain: one override path with --epochs (apply_run_overrides).
  const auto add_warmup = [](CLI::App* cmd, RunArgs& args) {
    cmd->add_option("--warmup", args.warmup,
                    "Override the spec's warm-up steps (train.warmup_steps): steps trained before "
                    "the timing starts")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  };
  add_warmup(run_cmd, run);
  run_cmd->add_option("--batch-size", run.batch_size, "Override the spec's batch size")
      ->excludes(batch_sizes_opt)
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  run_cmd
      ->add_option("--seeds", run.seeds,
                   "Train each mode N times, with training seeds 1..N (they change the "
                   "initialisation and the batch order; the data stay fixed). The table then "
                   "gives accuracy as mean +- std over the seeds and its difference from fp32 "
                   "with a 95% interval: a paired t interval over the seeds (the difference of "
                   "each seed's two runs, mean +- t(0.975, N-1) sd / sqrt(N)); the JSON gets "
                   "every run with its seed and a seed_summary[]")
      ->check(CLI::Range(int64_t{2}, int64_t{1000}));
  run_cmd
      ->add_option("--repeat", run.repeat,
                   "Train every spec x mode x batch N times, each a fresh model with the same "
                   "seed (identical numerics), interleaved across modes (fp32, bf16, fp32, bf16, "
                   "...) so that a drift of the machine does not land on one mode. The table "
                   "gives the median over the repetitions and the spread between them, and from 3 "
                   "repetitions each speedup's 95% interval (compare's bootstrap); the JSON "
                   "keeps every repetition and a repeat_summary[] with those intervals; `compare` "
                   "judges time by the variation between "
                   "repetitions and needs at least 3 a side (5 recommended in CI)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}));
  run_cmd->add_option("--seed", run.seed, "Override the spec's data seed")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  run_cmd->add_option("--json", run.json_path, "Write the results JSON (schema_version 1) here");
  run_cmd->add_option("--csv", run.csv_path, "Write one CSV row per model x precision here");
  run_cmd->add_option("--md", run.md_path, "Write the comparison table as Markdown here");
  run_cmd->add_flag("--quiet,-q", run.quiet, "No progress bar and no informational lines");
  std::string run_memory_limit, profile_memory_limit;
  const char* kMemoryLimitHelp =
      "Cap training memory (every category but the dataset copy, library workspaces included) "
      "at SIZE, e.g. 16GiB: would it fit that card? A mode that needs more is an oom row";
  run_cmd->add_option("--memory-limit", run_memory_limit, kMemoryLimitHelp);
  run_cmd->add_flag("--cuda-graphs", run.cuda_graphs,
                    "Capture the training step once as a CUDA graph and replay it (GPU only)");
  add_data_parallel_options(run_cmd, run);
  run_cmd->add_option(
      "--scaling-baseline", run.scaling_baseline,
      "Data parallel: the 1-rank run each run's scaling efficiency (samples/s over ranks x the "
      "1-rank samples/s) and the speedup at 1 rank are against. `run`: rank 0 trains each spec "
      "and mode alone first, at the same per-rank batch, while the other ranks wait asleep; or a "
      "result file of a plain `mpbench run` at that batch");

  std::vector<std::string> validate_specs;
  auto* validate_cmd =
      app.add_subcommand("validate", "Check spec files; exit 2 on the first error");
  validate_cmd->add_option("spec", validate_specs, "Model spec JSON file(s)")->required();
  std::string validate_json;
  validate_cmd->add_option("--json", validate_json,
                           "Also write what was checked (each spec's name, family, parameters "
                           "and modes) as JSON here; nothing is written when a spec is refused");

  InspectArgs inspect;
  auto* inspect_cmd = app.add_subcommand(
      "inspect",
      "Per-layer and sublayer table: output shape, parameters, FLOPs, dtypes, activation bytes, "
      "tensor-core alignment, predicted training memory");
  inspect_cmd->add_option("spec", inspect.spec, "Model spec JSON file")->required();
  inspect_cmd->add_option("--precision", inspect.precision,
                          "One mode (default: each of the spec's modes)");
  inspect_cmd->add_option("--depth", inspect.depth,
                          "sublayer (default): each layer and under it its GEMMs, convolutions, "
                          "norms and softmax; block: the layers alone");
  inspect_cmd->add_option("--json", inspect.json_path,
                          "Write the tables as JSON: {\"entries\": [one per mode: model, "
                          "precision, batch_size, params, forward_flops (per batch), "
                          "predicted_memory_bytes, misaligned, layers[]]}; each layer has name, "
                          "kind, output_shape, params, forward_flops and activation_bytes (per "
                          "batch), compute_dtype, storage_dtype, matmul and misaligned where it "
                          "is a GEMM or convolution, and children[]");

  ProfileArgs profile;
  std::string profile_precisions;
  auto* profile_cmd = app.add_subcommand(
      "profile",
      "Where a training step's time goes: every op timed with events, by layer, by op, top ops");
  profile_cmd->add_option("spec", profile.spec, "Model spec JSON file")->required();
  add_device_option(profile_cmd, profile.run.device);
  profile_cmd->add_option("--precisions,--precision", profile_precisions,
                          "Comma-separated modes (default: the spec's)");
  profile_cmd
      ->add_option(
          "--steps", profile.steps,
          "Training steps to profile per mode, after the spec's warm-up (more steps: a median "
          "that one stalled step does not move)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(10);
  add_warmup(profile_cmd, profile.run);
  profile_cmd->add_option("--batch-size", profile.run.batch_size, "Override the spec's batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  profile_cmd->add_option("--top", profile.top, "Rows of the top-ops table")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(25);
  profile_cmd->add_option("--json", profile.json_path,
                          "Write every op's time per step (and the run's env) as JSON here");
  profile_cmd->add_option("--memory-limit", profile_memory_limit, kMemoryLimitHelp);
  profile_cmd->add_flag("--quiet,-q", profile.run.quiet,
                        "No progress bar and no informational lines");
  add_data_parallel_options(profile_cmd, profile.run);

  ExplainArgs explain;
  std::string explain_precisions, explain_memory_limit;
  auto* explain_cmd = app.add_subcommand(
      "explain",
      "Why a mode helped or didn't: each mode profiled, and every mode against fp32 (or the first "
      "listed) by op kind, with the tensor-core-eligible share of the step, its Amdahl bound and "
      "flags (misaligned sizes, fallback kernels, launch-bound steps, loss-scale skips, ops that "
      "got slower)");
  explain_cmd->add_option("spec", explain.spec, "Model spec JSON file")->required();
  add_device_option(explain_cmd, explain.run.device);
  explain_cmd->add_option("--precisions,--precision", explain_precisions,
                          "Comma-separated modes, two or more (default: the spec's); the "
                          "baseline is fp32 when listed, else the first");
  explain_cmd
      ->add_option("--steps", explain.steps,
                   "Training steps to profile per mode, after the spec's warm-up (an op is named "
                   "slower only when it is slower across them: 10 can show it, 3 cannot)")
      ->check(CLI::Range(int64_t{1}, int64_t{100000}))
      ->default_val(10);
  explain_cmd
      ->add_option("--repeat", explain.repeat,
                   "Profile every mode N times, interleaved (fp32, bf16, fp32, bf16, ...): the "
                   "tables and the rank test pool the rounds' steps, and an op is named slower "
                   "only when its median is also slower in every round, so that one slow run "
                   "names nothing")
      ->check(CLI::Range(int64_t{1}, int64_t{100}))
      ->default_val(1);
  add_warmup(explain_cmd, explain.run);
  explain_cmd->add_option("--batch-size", explain.run.batch_size, "Override the spec's batch size")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  explain_cmd->add_option("--json", explain.json_path,
                          "Write the comparisons as JSON: comparisons[] with from, to, "
                          "measured_speedup, eligible_fraction, bound (from the card's datasheet "
                          "peaks or the native CPU's measured GEMM ceilings; null on the "
                          "reference), by_kind[] and flags[]; rounds, profiled_steps_per_round");
  explain_cmd->add_option("--md", explain.md_path, "Write the comparisons as Markdown");
  explain_cmd->add_option("--memory-limit", explain_memory_limit, kMemoryLimitHelp);
  explain_cmd->add_flag("--quiet,-q", explain.run.quiet,
                        "No progress bar and no informational lines");
  add_data_parallel_options(explain_cmd, explain.run);

  MaxBatchArgs maxbatch;
  std::string maxbatch_precisions, maxbatch_memory_limit;
  auto* maxbatch_cmd = app.add_subcommand(
      "maxbatch",
      "The largest batch per mode that really trains within a memory budget, and its ratio to "
      "fp32's");
  maxbatch_cmd->add_option("specs", maxbatch.specs, "Model spec JSON file(s)")->required();
  add_device_option(maxbatch_cmd, maxbatch.device);
  maxbatch_cmd->add_option("--precisions,--precision", maxbatch_precisions,
                           "Comma-separated modes (default: the spec's)");
  maxbatch_cmd->add_option(
      "--memory-limit", maxbatch_memory_limit,
      "Training memory to fit in (every category but the dataset copy, library workspaces "
      "included), e.g. 16GiB for a 16 GB card. Default: on a GPU its memory, on the CPU 4GiB");
  maxbatch_cmd
      ->add_option("--multiple", maxbatch.multiple,
                   "Only try batch sizes that are multiples of K (e.g. 8 for tensor cores)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20))
      ->default_val(1);
  maxbatch_cmd
      ->add_option("--steps", maxbatch.steps,
                   "Timed training steps per probe, after one warm-up step (samples/s comes "
                   "from them)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->default_val(2);
  maxbatch_cmd->add_option("--json", maxbatch.json_path, "Write the results as JSON here");
  maxbatch_cmd->add_option("--csv", maxbatch.csv_path, "Write the results as CSV here");
  maxbatch_cmd->add_option("--md", maxbatch.md_path, "Write the table as Markdown here");
  maxbatch_cmd->add_flag("--quiet,-q", maxbatch.quiet, "No line per probe");
  maxbatch_cmd->footer(
      "Each probe builds the model at one batch size and trains it for a warm-up step and --steps "
      "steps on synthetic data (steps x batch samples) under the budget. The search starts from "
      "the largest multiple of K predicted to fit (inspect's prediction) and probes it and the "
      "next multiple: 2 probes when the prediction is exact. Where a probe disagrees, up to 8 "
      "guesses follow, each the largest batch whose prediction plus what the last probe took "
      "beyond it fits (usually the answer in a probe or two). Failing that, or without a limit, "
      "it doubles from the largest batch that trained until a probe does not fit, then bisects: "
      "about 2 log2(max batch / K) probes. Exit 0 whatever the batches; 2 for bad input.");

  bool devices_json = false;
  auto* devices_cmd = app.add_subcommand(
      "devices", "GPUs and CPU of this machine: memory, SMs, tensor-core modes, datasheet peaks");
  devices_cmd->add_flag("--json", devices_json, "Print as JSON");

  ReportArgs report_args;
  auto* report_cmd = app.add_subcommand(
      "report", "Render result JSON files as one self-contained HTML page with charts");
  report_cmd
      ->add_option(
          "results", report_args.inputs,
          "Result JSON file(s) (mpbench run --json), and mpbench profile, explain and maxbatch "
          "--json files")
      ->required();
  report_cmd->add_option("--html", report_args.html_path, "Write the HTML report here")->required();
  report_cmd->add_option("--md", report_args.md_path, "Also write the tables as Markdown here");
  report_cmd->add_flag(
      "--history", report_args.history,
      "The result files are successive commits' (one per commit): draw trends over them instead");
  report_cmd->footer(R"(
--history: one point per file, the files in the order of their provenance.time_utc (oldest
first; the same time keeps the order given), each labelled on the x axis by its commit's first 7
characters (the file's name when it was written outside a git checkout) and its date. Per model
and mode (and device, batch, CUDA graphs) two charts: the median epoch time, whiskers and a band
min-max (between the repetitions or seeds of a file with several runs, i.e. the median of their
medians; a single run: over its epochs), and the training memory. A commit whose runs did not
finish is a gap with a cross and a note; a commit that did not run the mode is a gap. Every
point carries data-x, data-commit and data-value. A file without provenance (an mpbench older
than it) is bad input, exit 2: without a time there is no order. Two files of one commit are
both kept, each its own point. Profile files are refused. --md writes the points as tables.)");

  DataArgs data_args;
  auto* data_cmd = app.add_subcommand(
      "data", "Write the spec's dataset as raw arrays (for training it with another framework)");
  data_cmd->add_option("spec", data_args.spec, "Model spec JSON file")->required();
  data_cmd
      ->add_option("--out", data_args.out_prefix,
                   "File prefix: writes PREFIX.json, PREFIX.train_x.f32, PREFIX.train_y.i32, "
                   "PREFIX.eval_x.f32, PREFIX.eval_y.i32")
      ->required();
  data_cmd->add_option("--seed", data_args.seed, "Override the spec's data seed")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 62));
  data_cmd->add_flag("--params", data_args.params,
                     "Also write PREFIX.params.f32: the fp32 parameters `mpbench run` starts "
                     "from (with the same --seed, without --seeds), every mode alike, in "
                     "mpbench's layouts (linear "
                     "(out, in), convolution (K, R, S, C)); PREFIX.json names, shapes and "
                     "places each");
  data_cmd->add_flag("--quiet,-q", data_args.quiet, "No informational line");

  CompareArgs compare;
  auto* compare_cmd = app.add_subcommand(
      "compare",
      "CI regression gate: compare a current result JSON against a baseline, run by run");
  compare_cmd
      ->add_option("files", compare.files,
                   "BASELINE CURRENT result JSONs (mpbench run --json), or CURRENT alone with "
                   "--baseline")
      ->required()
      ->expected(1, 2);
  compare_cmd
      ->add_option("--baseline", compare.baselines,
                   "A baseline result JSON; repeat it (or give a quoted glob such as "
                   "'base-*.json') to treat several files as repetitions of one baseline")
      ->allow_extra_args(false);  // one file per --baseline: the next word may be CURRENT
  compare_cmd
      ->add_option("--time-threshold", compare.time_threshold,
                   "Slowdown of the median epoch time that fails, in percent")
      ->default_str("10%");
  compare_cmd
      ->add_option(
          "--memory-threshold", compare.memory_threshold,
          "Growth of the training memory (peak without the dataset) that fails, in percent")
      ->default_str("2%");
  compare_cmd
      ->add_option("--accuracy-threshold", compare.accuracy_threshold,
                   "Drop of the final accuracy that fails, in percentage points")
      ->default_str("0.5");
  compare_cmd->add_option("--loss-threshold", compare.loss_threshold,
                          "Relative change of the final loss (either way) that fails, in "
                          "percent; 0 requires an exact match (default: not compared)");
  compare_cmd->add_option("--md", compare.md_path,
                          "Write a Markdown summary (verdict, the rows to look at, the full "
                          "table folded) for $GITHUB_STEP_SUMMARY or a merge-request comment");
  compare_cmd->add_option("--json", compare.json_path, "Write the comparison as JSON here");
  compare_cmd->add_option("--junit", compare.junit_path,
                          "Write the comparison as JUnit XML here, one test case per row "
                          "(regressed: failure; inconclusive, missing, spec-changed: skipped)");
  compare_cmd->add_flag("--strict", compare.strict,
                        "Exit 4 when inconclusive, missing or environment-changed rows remain");
  compare_cmd->footer(kCompareRule);

  // Footers last: a subcommand made after app.footer() would inherit the whole list.
  app.footer(help_footer(""));
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
    const std::string own = sub->get_footer();
    sub->footer((own.empty() ? "" : own + "\n") + help_footer(sub->get_name()));
  }

  // Every option and argument that takes a value refuses an empty one (kNonEmpty), every
  // numeric one takes plain decimal only (kDecimalInteger, kDecimalNumber), and every other one
  // no word that reads as an option (not_an_option).
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    for (CLI::Option* opt :
         sub->get_options([](CLI::Option* o) { return o->get_expected_min() > 0; })) {
      // transform() puts each before the option's own checks (a range's "Value abc not in
      // range 1 to 10000" said nothing of what was wrong), the last one first.
      // "INT", or "INT:<a validator's description>".
      const std::string full = opt->get_type_name(), type = full.substr(0, full.find(':'));
      if (type == "INT" || type == "UINT") opt->transform(kDecimalInteger);
      if (type == "FLOAT") opt->transform(kDecimalNumber);
      if (type == "TEXT") opt->transform(not_an_option(names_a_file(*opt)));
      opt->transform(kNonEmpty);
    }

  // Under a launch of several ranks with one command line, rank 0 alone says a bad argument
  // (every rank has the same); in mpirun's MPMD form each rank says its own, naming itself.
  const EnvRank env_rank = rank_from_env();
  const bool others_say_it = env_rank.size > 1 && env_rank.rank != 0 && !env_rank.mpmd;
  const std::string who =
      env_rank.size > 1 && env_rank.rank != 0 ? fmt::format("rank {}: ", env_rank.rank) : "";
  try {
    // CLI11 would read an unknown first word as a stray argument; name it instead.
    const auto known = app.get_subcommands(
        [&](const CLI::App* sub) { return argc > 1 && sub->get_name() == argv[1]; });
    if (argc > 1 && argv[1][0] != '-' && known.empty()) {
      if (others_say_it) return 2;
      std::cerr << "mpbench: " << who << "unknown subcommand '" << printable_line(clip(argv[1]))
                << "' (expected run, profile, explain, maxbatch, validate, inspect, devices, data, "
                   "compare or "
                   "report; "
                   "see mpbench --help)\n";
      return 2;
    }
    // Before a subcommand only --help and --version are known; CLI11 would only say that a
    // subcommand is required.
    if (argc > 1 && argv[1][0] == '-' && std::strcmp(argv[1], "-") != 0 &&
        std::strcmp(argv[1], "--") != 0) {
      const std::string word = argv[1];
      if (!app.get_option_no_throw(word.substr(0, word.find('=')))) {
        if (others_say_it) return 2;
        std::cerr << "mpbench: " << who << "unknown option '" << printable_line(clip(word))
                  << "' (expected a subcommand, --help or --version; see mpbench --help)\n";
        return 2;
      }
    }
    try {
      app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
      return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
      return app.exit(e);
    } catch (const CLI::ParseError& e) {
      std::string msg = e.what();
      if (msg.empty()) msg = "bad arguments";
      // CLI11 says a repeated option as "--threads: At Most 1 required but received 2", which
      // reads like a value.
      const std::string repeated = ": At Most 1 required but received ";
      if (const size_t at = msg.find(repeated); at != std::string::npos)
        msg = msg.substr(0, at) + ": given more than once; give it once";
      if (others_say_it) return 2;
      // Point at the help of the subcommand the error is in.
      const auto given = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
      std::cerr << "mpbench: " << who << printable_line(msg) << " (see mpbench "
                << (given.empty() ? "" : given.front()->get_name() + " ") << "--help)\n";
      return 2;
    }
    // Only the commands that train take a launch of several ranks: the others would run as many
    // times over the same outputs.
    if (env_rank.size > 1 && !*run_cmd && !*profile_cmd && !*explain_cmd) {
      if (others_say_it) return 2;
      const auto given = app.get_subcommands([](const CLI::App* sub) { return sub->parsed(); });
      throw_bad_input(fmt::format(
          "{}{} runs in one process, not under a launch of {} ranks (mpirun or srun): only run, "
          "profile and explain train data parallel",
          who, given.empty() ? "this command" : given.front()->get_name(), env_rank.size));
    }
    if (*run_cmd) {
      if (!precisions.empty()) run.precisions = split_list("--precisions", precisions);
      if (!run_batch_sizes.empty())
        run.batch_sizes = parse_batch_sizes("--batch-sizes", run_batch_sizes);
      if (!run_memory_limit.empty())
        run.memory_limit = parse_memory_size("--memory-limit", run_memory_limit);
      return cmd_run(run);
    }
    // profile and explain read --precisions and --memory-limit alike.
    auto finish = [](RunArgs& r, const std::string& list, const std::string& limit) {
      if (!list.empty()) r.precisions = split_list("--precisions", list);
      if (!limit.empty()) r.memory_limit = parse_memory_size("--memory-limit", limit);
    };
    if (*profile_cmd) {
      finish(profile.run, profile_precisions, profile_memory_limit);
      return cmd_profile(profile);
    }
    if (*explain_cmd) {
      finish(explain.run, explain_precisions, explain_memory_limit);
      return cmd_explain(explain);
    }
    if (*maxbatch_cmd) {
      if (!maxbatch_precisions.empty())
        maxbatch.precisions = split_list("--precisions", maxbatch_precisions);
      if (!maxbatch_memory_limit.empty())
        maxbatch.memory_limit = parse_memory_size("--memory-limit", maxbatch_memory_limit);
      return cmd_maxbatch(maxbatch);
    }
    if (*validate_cmd) return cmd_validate(validate_specs, validate_json);
    if (*inspect_cmd) return cmd_inspect(inspect);
    if (*devices_cmd) return cmd_devices(devices_json);
    if (*report_cmd) return cmd_report(report_args);
    if (*data_cmd) return cmd_data(data_args);
    if (*compare_cmd) return cmd_compare(compare);
    return 2;
  } catch (const Error& e) {
    // No message: another rank of an MPI launch has said it (app/launch.cpp).
    if (*e.what()) std::cerr << "mpbench: " << printable_line(e.what()) << "\n";
    return e.exit_code();
  } catch (const std::bad_alloc&) {
    std::cerr << "mpbench: out of host memory\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "mpbench: internal error: " << printable_line(e.what()) << "\n";
    return 3;
  }
}

}  // namespace mpbench
