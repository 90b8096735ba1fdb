// `mpbench report`: the real executable on the committed H200 results and on a fresh CPU run; the
// page's structure (charts per model, escaping, no NaN coordinates); a render in headless Chromium
// (skipped when it is not installed); bad inputs exit 2. Plus the pieces: escaping, downsampling.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_util.h"

#include "app/html_report.h"
#include "app/result_files.h"
#include "app/svg.h"
#include "kernels/backend.h"
#include "train/results.h"
#include "train/statistics.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Result = mpbench::test::ShellResult;
using mpbench::test::read_file;

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

// The columns a table row spans: its cells, each its colspan wide.
size_t row_columns(const std::string& row) {
  static const std::regex cell(R"re(<t[hd](?:\s[^>]*)?>)re"), span(R"re(colspan="(\d+)")re");
  size_t n = 0;
  for (auto it = std::sregex_iterator(row.begin(), row.end(), cell); it != std::sregex_iterator();
       ++it) {
    const std::string tag = it->str();
    std::smatch m;
    n += std::regex_search(tag, m, span) ? std::stoul(m[1].str()) : 1;
  }
  return n;
}

// Every row of every table in the page spans its header's columns: a status cell that ran past
// them would push the table's edge out.
void expect_rows_fill_their_tables(const std::string& html) {
  size_t tables = 0;
  for (size_t at = html.find("<table>"); at != std::string::npos;
       at = html.find("<table>", at + 1), ++tables) {
    const std::string table = html.substr(at, html.find("</table>", at) - at);
    std::vector<size_t> widths;
    for (size_t r = table.find("<tr>"); r != std::string::npos; r = table.find("<tr>", r + 1))
      widths.push_back(row_columns(table.substr(r, table.find("</tr>", r) - r)));
    ASSERT_GT(widths.size(), 1u) << table;
    for (size_t i = 1; i < widths.size(); ++i) EXPECT_EQ(widths[i], widths[0]) << table;
  }
  EXPECT_GT(tables, 0u);
}

Result sh(const std::string& cmd, const fs::path& dir) {
  return mpbench::test::run_shell(cmd, dir.string());
}

// The committed H200 results of the three MLP configs, eager and with graphs, from the first run
// (named, so that results added to the folder later do not change what this test expects).
std::vector<std::string> h200_files() {
  std::vector<std::string> files;
  for (const char* model : {"mlp_wide", "mnist_mlp", "tiny_mlp"}) {
    for (const char* variant : {"eager", "graphs"}) {
      const fs::path p = fs::path(MPBENCH_SOURCE_DIR) / "results/h200/2026-11-29" /
                         (std::string(model) + "_" + variant + ".json");
      if (fs::exists(p)) files.push_back(p.string());
    }
  }
  return files;
}

std::string find_chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    for (const char* dir : {"/usr/bin/", "/usr/local/bin/", "/snap/bin/"}) {
      const std::string p = std::string(dir) + name;
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "";
}

// Every number in d="…", x=, y=, width=, height=, x1=… of the SVGs is finite.
void expect_finite_coordinates(const std::string& html) {
  static const std::regex attr(R"re(\s(?:x|y|x1|x2|y1|y2|width|height|d|viewBox)="([^"]*)")re");
  size_t checked = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), attr); it != std::sregex_iterator();
       ++it) {
    const std::string v = (*it)[1].str();
    ASSERT_EQ(v.find_first_of("nNiI"), std::string::npos) << "non-finite coordinate: " << v;
    ++checked;
  }
  EXPECT_GT(checked, 100u);
}

class ReportHtml : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mpbench_report_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  Result mpbench(const std::string& args) {
    return sh(std::string(MPBENCH_EXE) + " " + args, dir_);
  }

  // A fresh CPU run of tiny_mlp: the format as this build writes it.
  std::string cpu_run() {
    const std::string out = (dir_ / "tiny_cpu.json").string();
    const Result r = mpbench("run " + std::string(MPBENCH_SOURCE_DIR) +
                             "/configs/tiny_mlp.json --device reference --quiet --json " + out);
    EXPECT_EQ(r.code, 0) << r.err;
    return out;
  }

  // The CPU run with a hostile model name, one run oom and one diverged (NaN losses from step
  // 20), and the same run relabelled as PyTorch's.
  void write_variants(const std::string& cpu, std::string* evil, std::string* torch) {
    json j = json::parse(read_file(cpu));
    // Model names are held to the spec's rule when read (a model of its own here); the
    // environment's fields are free text.
    for (json& r : j["runs"]) r["model"] = "hostile_model";
    j["env"]["cpu"] = "<script>x</script> & \"q\"";
    j["runs"][2]["status"] = "oom";
    j["runs"][2]["status_detail"] = "out of <memory>";
    j["runs"][3]["status"] = "diverged";
    j["runs"][3]["status_detail"] = "loss is not finite";
    json& loss = j["runs"][3]["steps"]["loss"];
    for (size_t i = 20; i < loss.size(); ++i) loss[i] = nullptr;
    *evil = (dir_ / "hostile.json").string();
    std::ofstream(*evil) << j.dump();

    json t = json::parse(read_file(cpu));
    t["tool"] = {{"name", "pytorch"}, {"version", "2.5.1"}};
    *torch = (dir_ / "pytorch.json").string();
    std::ofstream(*torch) << t.dump();
  }

  fs::path dir_;
};

TEST_F(ReportHtml, RendersH200ResultsAndAFreshCpuRun) {
  const std::vector<std::string> files = h200_files();
  ASSERT_EQ(files.size(), 6u);
  std::string args = "report";
  for (const auto& f : files) args += " " + f;
  args += " " + cpu_run();
  const fs::path html_path = dir_ / "r.html", md_path = dir_ / "r.md";
  const Result r = mpbench(args + " --html " + html_path.string() + " --md " + md_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string html = read_file(html_path);
  ASSERT_GT(html.size(), 10000u);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  // Self-contained: no scripts, nothing fetched.
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  EXPECT_EQ(html.find("https://"), std::string::npos);

  for (const char* model : {"mlp_wide", "mnist_mlp", "tiny_mlp"}) {
    EXPECT_NE(html.find(std::string("id=\"model-") + model + "\""), std::string::npos) << model;
  }
  // Three models, each with every chart; all three have an amp_fp16 run, so a loss-scale chart.
  for (const char* kind : {"chart-time\"", "chart-throughput\"", "chart-memory\"",
                           "chart-memory-breakdown\"", "chart-loss\"", "chart-loss-scale\""}) {
    EXPECT_EQ(count(html, std::string("class=\"chart ") + kind), 3u) << kind;
  }
  // No data-parallel run among them: no chart of its communication.
  EXPECT_EQ(html.find("chart-data-parallel"), std::string::npos);
  // Eager and graphs runs of one model are told apart, and the H200 is named.
  // One tool on the page: the labels leave its name out.
  EXPECT_NE(html.find(">amp_bf16 +graphs<"), std::string::npos);
  EXPECT_EQ(html.find(">mpbench amp_bf16"), std::string::npos);
  EXPECT_NE(html.find("NVIDIA H200"), std::string::npos);
  EXPECT_NE(html.find("5.65×"), std::string::npos);  // mlp_wide amp_bf16 with graphs, as README
  // The CPU run's warning travels with its numbers, as under the console table.
  EXPECT_NE(html.find("note: on the CPU reference backend the times are of emulated"),
            std::string::npos);
  // The tooltips' figures are the file's: cv in percent, % of the datasheet's peak (none for
  // the reference run, which has no peak).
  {
    const json doc = json::parse(read_file(files[0]));
    const json& run = doc["runs"][0];
    // Its cvs are 0.06% to 0.26%: alone on a page none reads 0.0%.
    const fs::path one = dir_ / "one.html";
    ASSERT_EQ(mpbench("report " + files[0] + " --html " + one.string()).code, 0);
    const std::string page = read_file(one);
    EXPECT_NE(page.find(fmt::format("cv {:.1f}%, over its 4 epochs",
                                    100 * run["epoch_time_ms"]["cv"].get<double>())),
              std::string::npos);
    EXPECT_EQ(page.find("cv 0.0%"), std::string::npos);
    EXPECT_NE(html.find(fmt::format(
                  "{:.3g} TFLOP/s ({:.0f}% of {:.3g} peak)", run["tflops"].get<double>(),
                  run["percent_of_peak"].get<double>(), run["peak_tflops"].get<double>())),
              std::string::npos);
    EXPECT_EQ(html.find(" of 0 peak)"), std::string::npos);
  }
  // tiny_mlp is on two devices: the labels say which.
  EXPECT_NE(html.find(">fp32 · reference<"), std::string::npos);
  EXPECT_NE(html.find(">fp32 · cuda<"), std::string::npos);
  expect_finite_coordinates(html);

  // mnist_mlp has 2350 steps per run: downsampled to at most 500 points per curve.
  static const std::regex path_d("<path class=\"series\" d=\"([^\"]*)\"");
  size_t curves = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), path_d);
       it != std::sregex_iterator(); ++it) {
    const std::string d = (*it)[1].str();
    EXPECT_LE(count(d, "L") + count(d, "M"), 500u);
    ++curves;
  }
  // Loss: 8 + 8 + (8 + 4) runs; loss scale: the amp_fp16 runs, 2 + 2 + 3.
  EXPECT_EQ(curves, 8u + 8 + 12 + 2 + 2 + 3);

  const std::string md = read_file(md_path);
  EXPECT_EQ(count(md, "\n## "), files.size());  // one section per input file, the first at 0
  EXPECT_EQ(md.rfind("## ", 0), 0u);
  EXPECT_EQ(count(md, "### "), files.size() + 1);  // one table per file (one model each)
  EXPECT_NE(md.find("| amp_bf16 +graphs |"), std::string::npos);
}

TEST_F(ReportHtml, EscapesNamesAndShowsFailedRunsAndTools) {
  std::string evil, torch;
  write_variants(cpu_run(), &evil, &torch);
  const fs::path html_path = dir_ / "e.html";
  const Result r = mpbench("report " + evil + " " + torch + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<memory>"), std::string::npos);
  EXPECT_NE(html.find("&lt;script&gt;x&lt;/script&gt; &amp; &quot;q&quot;"), std::string::npos);
  // A model name off the spec's rule (markup, a line break, a bidi override) is refused when
  // read: it would reach the console, Markdown and file names as it is.
  for (const char* name : {"<script>x</script>", "a\nb", "a\u202eb"}) {
    json j = json::parse(read_file(cpu_run()));
    j["runs"][0]["model"] = name;
    const std::string bad = (dir_ / "badname.json").string();
    std::ofstream(bad) << j.dump();
    const Result b = mpbench("report " + bad + " --html " + (dir_ / "b.html").string());
    EXPECT_EQ(b.code, 2) << name;
    EXPECT_NE(b.err.find("runs[0].model: expected a spec name"), std::string::npos) << b.err;
  }
  EXPECT_NE(html.find("oom: out of &lt;memory&gt;"), std::string::npos);
  EXPECT_NE(html.find("diverged: loss is not finite"), std::string::npos);
  EXPECT_NE(html.find("mpbench amp_bf16 (diverged)"), std::string::npos);
  // The PyTorch file's runs are a second set of bars, labelled by tool.
  EXPECT_NE(html.find("pytorch amp_bf16"), std::string::npos);
  EXPECT_NE(html.find("pytorch 2.5.1"), std::string::npos);
  expect_finite_coordinates(html);
}

// A file's path is text of the user's too: the environment card's heading escapes it.
TEST_F(ReportHtml, EscapesTheFilesPathInItsEnvironmentCard) {
  const fs::path odd = dir_ / "r<i>&.json";
  fs::copy_file(fs::path(MPBENCH_SOURCE_DIR) / "results/h200/2026-11-29/tiny_mlp_eager.json", odd);
  const fs::path html_path = dir_ / "p.html";
  const Result r = mpbench("report '" + odd.string() + "' --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  EXPECT_EQ(html.find("<i>"), std::string::npos);
  EXPECT_NE(
      html.find("<div class=\"card env\"><h3>" + mpbench::html_escape(odd.string()) + "</h3>"),
      std::string::npos);
}

// A real amp_fp8 run draws the FP8 amax and scale charts, one curve per representative tensor
// (tiny_mlp's one FP8 layer, fc1: x, w and dy); a page without FP8 runs has neither.
TEST_F(ReportHtml, Fp8RunsDrawTheirAmaxAndScale) {
  const std::string out = (dir_ / "fp8.json").string();
  const Result run = mpbench("run " + std::string(MPBENCH_SOURCE_DIR) +
                             "/configs/tiny_mlp.json --device reference --quiet --epochs 1 "
                             "--precisions amp_bf16,amp_fp8 --json " +
                             out);
  ASSERT_EQ(run.code, 0) << run.err;
  const fs::path html_path = dir_ / "f.html";
  const Result r = mpbench("report " + out + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  EXPECT_EQ(count(html, "class=\"chart chart-fp8-amax\""), 1u);
  EXPECT_EQ(count(html, "class=\"chart chart-fp8-scale\""), 1u);
  for (const char* t : {"fc1.x (fp8_e4m3", "fc1.w (fp8_e4m3", "fc1.dy (fp8_e5m2"})
    EXPECT_NE(html.find(t), std::string::npos) << t;
  expect_finite_coordinates(html);
  // A series clipped at more steps than it has is refused, naming the field; all of them is not.
  json j = json::parse(read_file(out));
  size_t fp8 = 0;
  while (!j["runs"][fp8].contains("fp8_scaling")) ++fp8;
  json& series = j["runs"][fp8]["fp8_scaling"][0];
  const int64_t steps = static_cast<int64_t>(series["amax"].size());
  const std::string clipped = (dir_ / "clipped.json").string();
  for (const int64_t n : {steps, steps + 1}) {
    series["clipped_steps"] = n;
    std::ofstream(clipped) << j.dump();
    const Result c = mpbench("report " + clipped + " --html " + (dir_ / "c.html").string());
    if (n == steps) {
      EXPECT_EQ(c.code, 0) << c.err;
      continue;
    }
    EXPECT_EQ(c.code, 2) << c.err;
    EXPECT_EQ(count(c.err, "\n"), 1u) << c.err;
    EXPECT_NE(c.err.find(fmt::format("clipped.json: runs[{}].fp8_scaling[0].clipped_steps: "
                                     "expected at most the series' {} steps, got {}",
                                     fp8, steps, n)),
              std::string::npos)
        << c.err;
  }
  const fs::path plain = dir_ / "p.html";
  ASSERT_EQ(mpbench("report " + cpu_run() + " --html " + plain.string()).code, 0);
  EXPECT_EQ(read_file(plain).find("chart-fp8"), std::string::npos);
}

// A sweep's loss chart marks every curve's epoch boundaries (batch 16 and 64 end their epochs at
// different steps), and its caption says that they differ; one batch's boundaries alone are
// simply "epoch boundaries".
TEST_F(ReportHtml, LossChartMarksEveryCurvesEpochBoundaries) {
  const std::string out = (dir_ / "sweep.json").string();
  const Result run = mpbench("run " + std::string(MPBENCH_SOURCE_DIR) +
                             "/configs/tiny_mlp.json --device reference --quiet --epochs 2 "
                             "--batch-sizes 16,64 --precisions fp32 --json " +
                             out);
  ASSERT_EQ(run.code, 0) << run.err;
  json j = json::parse(read_file(out));
  ASSERT_EQ(j["runs"].size(), 2u);
  // The lines inside the plot: the boundaries of every run, but the last step of the longest,
  // which is the plot's right edge.
  auto inner_boundaries = [](const json& runs) {
    std::set<int64_t> steps;
    int64_t longest = 0;
    for (const json& r : runs) {
      int64_t step = r["warmup_steps"].get<int64_t>();
      if (step > 0) steps.insert(step);
      for (const json& e : r["epochs"]) steps.insert(step += e["steps"].get<int64_t>());
      longest = std::max(longest, step);
    }
    steps.erase(longest);
    return steps.size();
  };
  auto loss_figure = [&](const std::string& file) {
    const fs::path html = dir_ / "sweep.html";
    const Result r = mpbench("report " + file + " --html " + html.string());
    EXPECT_EQ(r.code, 0) << r.err;
    const std::string page = read_file(html);
    const size_t at = page.find("Training loss per step");
    return at == std::string::npos ? "" : page.substr(at, page.find("</figure>", at) - at);
  };
  std::string fig = loss_figure(out);
  EXPECT_EQ(count(fig, "<line class=\"epoch\""), inner_boundaries(j["runs"])) << fig;
  EXPECT_GT(inner_boundaries(j["runs"]), inner_boundaries(json::array({j["runs"][0]})));
  EXPECT_NE(fig.find("dotted lines: every curve's epoch boundaries"), std::string::npos) << fig;

  j["runs"].erase(1);
  const std::string one = (dir_ / "one.json").string();
  std::ofstream(one) << j.dump();
  fig = loss_figure(one);
  EXPECT_EQ(count(fig, "<line class=\"epoch\""), inner_boundaries(j["runs"])) << fig;
  EXPECT_NE(fig.find("dotted lines: epoch boundaries</span>"), std::string::npos) << fig;

  // Beside it, a run of twice the epochs of half the steps: its boundaries hold the first's, but
  // the first's curve has no boundary at its middle ones, and the caption says they differ.
  json halves = j["runs"][0];
  halves["precision"] = "tf32";
  json epochs = json::array();
  for (const json& e : j["runs"][0]["epochs"])
    for (int half = 0; half < 2; ++half) {
      json h = e;
      h["steps"] = e["steps"].get<int64_t>() / 2;
      epochs.push_back(h);
    }
  halves["epochs"] = epochs;
  j["runs"].push_back(halves);
  std::ofstream(one) << j.dump();
  fig = loss_figure(one);
  EXPECT_NE(fig.find("dotted lines: every curve's epoch boundaries"), std::string::npos) << fig;
}

// maxbatch: a mode with no native path is its status where the bar would be, as a run without a
// value is in the other charts, not a 1-px bar with "unsupported" as its value.
TEST_F(ReportHtml, AnUnsupportedMaxbatchModeShowsItsStatusInsteadOfABar) {
  std::string why;
  if (!mpbench::native_cpu_available(&why)) GTEST_SKIP() << why;  // tf32 unsupported there
  const std::string out = (dir_ / "m.json").string();
  const Result run = mpbench("maxbatch " + std::string(MPBENCH_SOURCE_DIR) +
                             "/configs/tiny_mlp.json --device cpu --precisions fp32,tf32 "
                             "--memory-limit 1MiB --quiet --json " +
                             out);
  ASSERT_EQ(run.code, 0) << run.err;
  const fs::path html_path = dir_ / "m.html";
  const Result r = mpbench("report " + out + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  const size_t at = html.find("<title>tiny_mlp tf32: unsupported");
  ASSERT_NE(at, std::string::npos) << html;
  const std::string bar = html.substr(at, html.find("</g>", at) - at);
  EXPECT_EQ(bar.find("<rect"), std::string::npos) << bar;
  EXPECT_NE(bar.find("class=\"status\" text-anchor=\"start\">unsupported<"), std::string::npos)
      << bar;
  EXPECT_EQ(count(html, "<rect"), 1u);  // fp32's bar
}

// A run's unsupported mode was never built: its status stands in the memory charts too, not a
// "0 B" bar and "0 B + 0 B data" (its memory is null in the JSON).
TEST_F(ReportHtml, AnUnsupportedRunHasNoMemoryBar) {
  std::string why;
  if (!mpbench::native_cpu_available(&why)) GTEST_SKIP() << why;  // tf32 unsupported there
  const std::string out = (dir_ / "u.json").string();
  ASSERT_EQ(mpbench("run " + std::string(MPBENCH_SOURCE_DIR) +
                    "/configs/tiny_mlp.json --device cpu --precisions fp32,tf32 --epochs 1 "
                    "--quiet --json " +
                    out)
                .code,
            0);
  const fs::path html_path = dir_ / "u.html";
  ASSERT_EQ(mpbench("report " + out + " --html " + html_path.string()).code, 0);
  const std::string html = read_file(html_path);
  EXPECT_EQ(html.find("training peak 0 B"), std::string::npos);
  EXPECT_EQ(html.find("0 B + 0 B data"), std::string::npos);
  const size_t memory = html.find("class=\"chart chart-memory\"");
  ASSERT_NE(memory, std::string::npos);
  EXPECT_NE(html.find("<title>tf32: unsupported", memory), std::string::npos);
}

// The explain and maxbatch tables escape their cells as the run tables do: a mode and a flag
// are free text in those files (a model name is held to the spec's rule).
TEST_F(ReportHtml, ExplainAndMaxbatchTablesEscapeTheirCells) {
  const std::string evil = "<b>m</b>";
  const json explain = {
      {"kind", "explain"},
      {"spec", {{"name", "tiny_mlp"}}},
      {"baseline", "fp32"},
      {"emulated", false},
      {"comparisons",
       {{{"from", "fp32"},
         {"to", evil},
         {"from_step_ms", 20},
         {"to_step_ms", 8},
         {"measured_speedup", 2.5},
         {"bound", 3},
         {"by_kind",
          {{{"kind", "gemm"}, {"from_ms_per_step", 10}, {"to_ms_per_step", 2}},
           {{"kind", "softmax"}, {"from_ms_per_step", 5}, {"to_ms_per_step", 6}}}},
         {"flags", {evil}}}}}};
  const json maxbatch = {{"kind", "maxbatch"},
                         {"max_batch",
                          {{{"model", "tiny_mlp"},
                            {"precision", evil},
                            {"max_batch", 64},
                            {"at_spec_limit", false}}}}};
  const std::string e = (dir_ / "e.json").string(), m = (dir_ / "m.json").string();
  std::ofstream(e) << explain.dump();
  std::ofstream(m) << maxbatch.dump();
  const fs::path html_path = dir_ / "em.html";
  const Result r = mpbench("report " + e + " " + m + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  EXPECT_EQ(html.find(evil), std::string::npos);
  const size_t at_explain = html.find("Why a mode helped"),
               at_maxbatch = html.find("Largest batch that fits");
  ASSERT_NE(at_explain, std::string::npos);
  ASSERT_NE(at_maxbatch, std::string::npos);
  const std::string explain_part = html.substr(at_explain, at_maxbatch - at_explain);
  EXPECT_NE(explain_part.find("<td>&lt;b&gt;m&lt;/b&gt; vs fp32</td>"), std::string::npos)
      << explain_part;
  EXPECT_NE(explain_part.find("<td>&lt;b&gt;m&lt;/b&gt;</td>"), std::string::npos);  // the flag
  // The largest share is of the baseline's step: gemm's 10 of 20 ms, though softmax took longer
  // in the new mode.
  EXPECT_NE(explain_part.find("<td>gemm 50% (5.00x)</td>"), std::string::npos) << explain_part;
  EXPECT_NE(html.find("<td>&lt;b&gt;m&lt;/b&gt;</td>", at_maxbatch), std::string::npos)
      << html.substr(at_maxbatch);
}

TEST_F(ReportHtml, RendersInHeadlessChromium) {
  const std::string chromium = find_chromium();
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium not found (apt-get install chromium; scripts/setup.sh installs it)";
  }
  std::string evil, torch;
  const std::string cpu = cpu_run();
  write_variants(cpu, &evil, &torch);
  const std::string mnist =
      std::string(MPBENCH_SOURCE_DIR) + "/results/h200/2026-11-29/mnist_mlp_graphs.json";
  const fs::path html_path = dir_ / "page.html";
  ASSERT_EQ(mpbench("report " + mnist + " " + cpu + " " + evil + " " + torch + " --html " +
                    html_path.string())
                .code,
            0);

  // Chromium wants a writable home and profile; keep both inside the test's directory.
  const std::string env = "HOME=" + dir_.string() + " XDG_CONFIG_HOME=" + dir_.string() +
                          " XDG_CACHE_HOME=" + dir_.string() + " ";
  const std::string base = env + "timeout 120 " + chromium +
                           " --headless --no-sandbox --disable-gpu --no-first-run "
                           "--user-data-dir=" +
                           (dir_ / "profile").string() + " --enable-logging=stderr --v=0 ";
  const Result dom = sh(base + "--dump-dom file://" + html_path.string(), dir_);
  ASSERT_EQ(dom.code, 0) << dom.err.substr(0, 2000);
  // Three models (mnist_mlp, tiny_mlp, the hostile one), each with its charts.
  EXPECT_EQ(count(dom.out, "<section class=\"model\">"), 3u);
  for (const char* kind : {"chart chart-time\"", "chart chart-throughput\"", "chart chart-memory\"",
                           "chart chart-memory-breakdown\"", "chart chart-loss\""}) {
    EXPECT_EQ(count(dom.out, kind), 3u) << kind;
  }
  EXPECT_EQ(count(dom.out, "chart chart-loss-scale\""), 3u);
  EXPECT_EQ(dom.out.find("<script"), std::string::npos);
  EXPECT_NE(dom.out.find("&lt;script&gt;x&lt;/script&gt;"), std::string::npos);

  // Console errors or parse failures of the page itself (Chromium's own dbus/GPU noise aside).
  std::istringstream lines(dom.err);
  for (std::string line; std::getline(lines, line);) {
    EXPECT_EQ(line.find("Uncaught"), std::string::npos) << line;
    EXPECT_EQ(line.find("CONSOLE"), std::string::npos) << line;
    if (line.find("page.html") != std::string::npos) {
      EXPECT_EQ(line.find("ERROR"), std::string::npos) << line;
    }
  }

  const fs::path png = dir_ / "shot.png";
  const Result shot =
      sh(base + "--hide-scrollbars --window-size=1280,4000 --screenshot=" + png.string() +
             " file://" + html_path.string(),
         dir_);
  ASSERT_EQ(shot.code, 0) << shot.err.substr(0, 2000);
  const std::string bytes = read_file(png);
  ASSERT_GT(bytes.size(), 50000u);  // a blank 1280x4000 page compresses to a few KiB
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  if (const char* keep = std::getenv("MPBENCH_REPORT_SCREENSHOT"))
    fs::copy_file(png, keep, fs::copy_options::overwrite_existing);
}

TEST_F(ReportHtml, ProfilesShowWhereTheTimeGoes) {
  const std::string run = cpu_run();
  const std::string prof = (dir_ / "prof.json").string();
  const Result p = mpbench("profile " + std::string(MPBENCH_SOURCE_DIR) +
                           "/configs/tiny_mlp.json --device reference --quiet --steps 2 " +
                           "--precisions fp32,amp_bf16 --json " + prof);
  ASSERT_EQ(p.code, 0) << p.err;
  const fs::path html_path = dir_ / "r.html";
  const Result r = mpbench("report " + run + " " + prof + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  EXPECT_EQ(count(html, "class=\"chart chart-profile\""), 1u);
  EXPECT_NE(html.find("Where a step"), std::string::npos);
  EXPECT_NE(html.find("1 profile file: " + prof), std::string::npos);
  // A bar per profiled mode, the GEMMs and the optimizer among its parts, the step beside it.
  const std::string chart = html.substr(html.find("chart chart-profile"));
  EXPECT_NE(chart.find(">fp32<"), std::string::npos);
  EXPECT_NE(chart.find(">amp_bf16<"), std::string::npos);
  EXPECT_NE(chart.find("fp32: GEMM "), std::string::npos);
  EXPECT_NE(chart.find("amp_bf16: optimizer, unscale, loss scale "), std::string::npos);
  EXPECT_NE(chart.find(" ms</text>"), std::string::npos);
  expect_finite_coordinates(html);
  // The ops add up to the mean step (their sums are over every step), not the median one.
  json means = json::parse(read_file(prof));
  for (json& m : means["profiles"]) m["step_mean_ms"] = 123.0, m["step_ms"] = 456.0;
  const std::string means_path = (dir_ / "means.json").string();
  std::ofstream(means_path) << means.dump();
  const fs::path means_html = dir_ / "means.html";
  ASSERT_EQ(mpbench("report " + run + " " + means_path + " --html " + means_html.string()).code, 0);
  EXPECT_NE(read_file(means_html).find(" of 123 ms</text>"), std::string::npos);

  // Profiles are extras: one alone, or one of a model without runs, is bad input.
  json other = json::parse(read_file(prof));
  other["spec"]["name"] = "elsewhere";
  const std::string other_path = (dir_ / "other.json").string();
  std::ofstream(other_path) << other.dump();
  json broken = json::parse(read_file(prof));
  broken["profiles"][0].erase("ops");
  const std::string broken_path = (dir_ / "broken.json").string();
  std::ofstream(broken_path) << broken.dump();
  broken["profiles"][0]["ops"] = nullptr;  // used to read as no ops at all
  const std::string null_ops = (dir_ / "null_ops.json").string();
  std::ofstream(null_ops) << broken.dump();
  const std::string out = (dir_ / "o.html").string();
  for (const auto& [args, fragment] : std::vector<std::pair<std::string, std::string>>{
           {"report " + prof + " --html " + out, "at least one result"},
           {"report " + run + " " + other_path + " --html " + out, "elsewhere"},
           {"report " + run + " " + broken_path + " --html " + out, "profiles[0].ops: missing"},
           {"report " + run + " " + null_ops + " --html " + out,
            "null_ops.json: profiles[0].ops: expected an array"}}) {
    const Result b = mpbench(args);
    EXPECT_EQ(b.code, 2) << args << "\n" << b.err;
    EXPECT_EQ(count(b.err, "\n"), 1u) << b.err;
    EXPECT_NE(b.err.find(fragment), std::string::npos) << b.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

// A profile file lists an op once per layer scope: the chart's part for it is their sum, in the
// order the ops first appear.
TEST_F(ReportHtml, AProfilesOpsAddUpOverTheirScopes) {
  const std::string path = (dir_ / "ops.json").string();
  std::ofstream(path) << R"({"spec": {"name": "m"}, "profiles": [{"precision": "fp32",
      "status": "ok", "step_time_ms": 4, "ops": [{"op": "gemm", "ms_per_step": 1},
      {"op": "cast", "ms_per_step": 0.5}, {"op": "gemm", "ms_per_step": 2}]}]})";
  const mpbench::ReportFile file = mpbench::read_report_file(path);
  ASSERT_TRUE(std::holds_alternative<mpbench::ProfileInput>(file));
  const auto& p = std::get<mpbench::ProfileInput>(file);
  ASSERT_EQ(p.modes.size(), 1u);
  EXPECT_EQ(p.modes[0].ms_by_op,
            (std::vector<std::pair<std::string, double>>{{"gemm", 3.0}, {"cast", 0.5}}));
}

// One epoch has no spread: its tooltip says n/a, as the tables do, never a cv of 0%.
TEST_F(ReportHtml, OneEpochShowsNoSpread) {
  const std::string one = (dir_ / "one.json").string(), html = (dir_ / "one.html").string();
  ASSERT_EQ(mpbench("run " + std::string(MPBENCH_SOURCE_DIR) +
                    "/configs/tiny_mlp.json --device reference --quiet --epochs 1 "
                    "--precisions fp32 --json " +
                    one)
                .code,
            0);
  const Result r = mpbench("report " + one + " --html " + html);
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string page = read_file(html);
  EXPECT_NE(page.find("cv n/a, over its 1 epoch)"), std::string::npos) << page.substr(0, 2000);
  EXPECT_EQ(page.find("cv 0.0%"), std::string::npos);
}

// An output that cannot be written (a full disk) does not cost the other, in both report forms.
TEST_F(ReportHtml, AFailedOutputDoesNotCostTheOther) {
  const std::string good = cpu_run();  // with the provenance --history orders by
  for (const std::string history : {"", " --history"}) {
    const std::string md = (dir_ / ("o" + std::to_string(history.size()) + ".md")).string();
    const Result r = mpbench("report " + good + history + " --html /dev/full --md " + md);
    EXPECT_EQ(r.code, 3) << history << r.err;
    EXPECT_NE(r.err.find("/dev/full"), std::string::npos) << r.err;
    EXPECT_TRUE(fs::exists(md)) << history;
    EXPECT_NE(read_file(md).find("tiny_mlp"), std::string::npos) << history;
  }
}

TEST_F(ReportHtml, BadInputsExit2) {
  const std::string good =
      std::string(MPBENCH_SOURCE_DIR) + "/results/h200/2026-11-29/tiny_mlp_eager.json";
  const std::string out = (dir_ / "o.html").string();
  auto file = [&](const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    std::ofstream(p) << text;
    return p.string();
  };
  json wrong_version = json::parse(read_file(good));
  wrong_version["schema_version"] = 7;
  json missing_field = json::parse(read_file(good));
  missing_field["runs"][0].erase("precision");

  // Values a result file must not hold, each refused with the file and the JSON path.
  auto with = [&](const std::string& name, const std::function<void(json&)>& change) {
    json j = json::parse(read_file(good));
    change(j);
    return file(name, j.dump());
  };
  const std::string copy = file("copy.json", read_file(good));
  const std::string fifo = (dir_ / "fifo.json").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);  // no writer: reading it would block forever
  std::string huge = read_file(good);
  huge.replace(huge.find("\"batch_size\":"), 13, "\"batch_size\": 1e400, \"x\":");
  // An overflow is placed as a syntax error is: the number's line and column.
  const size_t at = huge.find("1e400");
  const std::string overflow_at =
      fmt::format("huge.json:{}:{}: ", 1 + std::count(huge.begin(), huge.begin() + at, '\n'),
                  at - huge.rfind('\n', at));

  struct Case {
    std::string args, fragment;
  };
  const std::vector<Case> cases = {
      {"report " + file("huge.json", huge) + " --html " + out,
       overflow_at + "JSON error: number overflow parsing '1e400'"},
      {"report " + with("neg.json", [](json& j) { j["runs"][0]["epochs"][0]["time_ms"] = -1; }) +
           " --html " + out,
       "neg.json: runs[0].epochs[0].time_ms: expected a number > 0 and <= 1e+12, got -1"},
      {"report " + with("acc.json", [](json& j) { j["runs"][0]["final_accuracy"] = 1.5; }) +
           " --html " + out,
       "acc.json: runs[0].final_accuracy: expected a number in [0, 1], got 1.5"},
      {"report " +
           with("eacc.json", [](json& j) { j["runs"][0]["epochs"][0]["eval_accuracy"] = 1.5; }) +
           " --html " + out,
       "eacc.json: runs[0].epochs[0].eval_accuracy: expected a number in [0, 1], got 1.5"},
      // A run that trained without its accuracy, loss or memory would compare as 0s.
      {"report " + with("noacc.json", [](json& j) { j["runs"][0].erase("final_accuracy"); }) +
           " --html " + out,
       "noacc.json: runs[0].final_accuracy: missing"},
      {"report " + with("noloss.json", [](json& j) { j["runs"][0].erase("final_loss"); }) +
           " --html " + out,
       "noloss.json: runs[0].final_loss: missing"},
      {"report " + with("nomem.json", [](json& j) { j["runs"][0].erase("peak_memory_bytes"); }) +
           " --html " + out,
       "nomem.json: runs[0].peak_memory_bytes: missing"},
      {"report " +
           with("notracked.json",
                [](json& j) { j["runs"][0]["peak_memory_bytes"].erase("tracked"); }) +
           " --html " + out,
       "notracked.json: runs[0].peak_memory_bytes.tracked: missing"},
      {"report " + with("nan.json", [](json& j) { j["runs"][0]["epoch_time_ms"]["median"] = {}; }) +
           " --html " + out,
       "nan.json: runs[0].epoch_time_ms.median: expected a number in [0, 1e+12], got null"},
      {"report " +
           with("scale.json", [](json& j) { j["runs"][0]["steps"]["loss_scale"][0] = -1; }) +
           " --html " + out,
       "scale.json: runs[0].steps.loss_scale[0]: expected a number >= 0"},
      // A step's series are floats: past float's largest is no loss it could hold.
      {"report " + with("big.json", [](json& j) { j["runs"][0]["steps"]["loss"][0] = 1e39; }) +
           " --html " + out,
       "big.json: runs[0].steps.loss[0]: expected a number"},
      {"report " + copy + " --html " + copy, "is the input"},
      {"report " + (dir_ / "nope.json").string() + " --html " + out,
       "nope.json: cannot read result file: No such file"},
      {"report " + file("bad.json", "{\"runs\": [") + " --html " + out,
       "bad.json:1:11: JSON syntax error"},
      {"report " + dir_.string() + " --html " + out, "is a directory, expected a regular file"},
      {"report " + fifo + " --html " + out, "is a FIFO, expected a regular file"},
      {"report " + file("v7.json", wrong_version.dump()) + " --html " + out, "v7.json"},
      {"report " + file("nofield.json", missing_field.dump()) + " --html " + out, "precision"},
      {"report " + file("arr.json", "[1, 2]") + " --html " + out, "arr.json"},
      {"report " + good, "--html"},
      {"report --html " + out, "results"},
      {"report " + good + " --html " + (dir_ / "no/such/dir/o.html").string(), "--html"},
      {"report " + good + " --html " + out + " --md " + dir_.string(), "--md"},
  };
  for (const Case& c : cases) {
    const Result r = mpbench(c.args);
    EXPECT_EQ(r.code, 2) << c.args << "\n" << r.err;
    EXPECT_EQ(count(r.err, "\n"), 1u) << r.err;
    EXPECT_NE(r.err.find(c.fragment), std::string::npos) << c.args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
  EXPECT_EQ(read_file(copy), read_file(good)) << "the input was overwritten";
  // The version error says what it expected.
  const Result v = mpbench("report " + file("v7b.json", wrong_version.dump()) + " --html " + out);
  EXPECT_NE(v.err.find("schema_version"), std::string::npos) << v.err;
}

TEST(HtmlReport, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(mpbench::html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(mpbench::html_escape("plain ±"), "plain ±");
  // Controls, which HTML does not allow (a file's status_detail), shown as C writes them.
  EXPECT_EQ(mpbench::html_escape("a\x1b[31m\x7f\u0085\tb\nc"), "a\\x1b[31m\\x7f\\u{0085}\tb\nc");
  // A right-to-left override (a file name that reads as another) and the other bidi controls.
  EXPECT_EQ(mpbench::html_escape("run\u202Enosj.exe \u2066x\u2069 \u200F"),
            "run\\u{202E}nosj.exe \\u{2066}x\\u{2069} \\u{200F}");
  // Bytes that are not UTF-8 (a Latin-1 file name; a lead byte past 0xf7) in a page that says
  // charset utf-8: as C writes them.
  EXPECT_EQ(mpbench::html_escape("r\xe9s\xff \xf8\x90\x80\x80 caf\u00e9"),
            "r\\xe9s\\xff \\xf8\\x90\\x80\\x80 caf\u00e9");
}

// The largest share is the kind that took the most of the baseline's step, not of the new mode's:
// that is where the speedup had to come from.
TEST(HtmlReport, ExplainsLargestShareIsOfTheBaselinesStep) {
  mpbench::ExplainInput e;
  mpbench::ExplainInput::Pair p;
  p.from = "fp32";
  p.to = "amp_bf16";
  p.from_step_ms = 20;
  p.to_step_ms = 8;
  p.measured_speedup = 2.5;
  p.bound = 3;
  p.by_kind = {{"gemm", 10, 2}, {"softmax", 5, 6}};
  e.comparisons.push_back(p);
  const mpbench::TextTable t = mpbench::explain_table(e);
  ASSERT_EQ(t.rows.size(), 1u);
  ASSERT_EQ(t.head[4], "largest share");
  EXPECT_EQ(t.rows[0][4], "gemm 50% (5.00x)");
}

TEST(HtmlReport, DownsamplesToAtMostMaxPointsKeepingGapsAndMinima) {
  std::vector<double> ys(2350);
  for (size_t i = 0; i < ys.size(); ++i) ys[i] = 2.0 + std::sin(double(i));
  auto pts = mpbench::downsample(ys, 500);
  EXPECT_LE(pts.size(), 500u);
  EXPECT_GE(pts.size(), 400u);
  EXPECT_DOUBLE_EQ(pts.front().first, 2.0);  // bucket of 5: steps 0..4, centre 2
  EXPECT_NEAR(pts.front().second, (ys[0] + ys[1] + ys[2] + ys[3] + ys[4]) / 5, 1e-12);

  // Short series are kept as they are.
  auto same = mpbench::downsample({1, 2, 3}, 500);
  ASSERT_EQ(same.size(), 3u);
  EXPECT_EQ(same[2], std::make_pair(2.0, 3.0));

  // Non-finite values drop out of their bucket; a bucket of nothing but NaN is a gap.
  std::vector<double> with_nan = {1, NAN, 3, NAN, NAN, NAN};
  auto g = mpbench::downsample(with_nan, 3);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_DOUBLE_EQ(g[0].second, 1);
  EXPECT_DOUBLE_EQ(g[1].second, 3);
  EXPECT_TRUE(std::isnan(g[2].second));

  // The minimum keeps a single-step loss-scale back-off visible.
  std::vector<double> scale(1000, 65536);
  scale[777] = 32768;
  auto m = mpbench::downsample(scale, 100, true);
  double lowest = INFINITY;
  for (auto [x, y] : m) lowest = std::min(lowest, y);
  EXPECT_EQ(lowest, 32768);
}

// ---------------------------------------------------------------------------------------------
// report --history: result files of successive commits, written by mpbench's own writer from
// hand-made reports, come back as trend points in time order.

mpbench::RunResult history_run(const std::string& precision, std::vector<double> epoch_ms,
                               size_t memory, std::optional<int64_t> repetition = std::nullopt,
                               mpbench::RunStatus status = mpbench::RunStatus::Ok) {
  mpbench::RunResult r;
  r.model = "hist_mlp";
  r.family = "mlp";
  r.precision = precision;
  r.device = "cpu";
  r.status = status;
  if (status == mpbench::RunStatus::Oom) r.status_detail = "out of memory";
  r.batch_size = 32;
  r.train_samples = 256;
  r.repetition = repetition;
  if (status == mpbench::RunStatus::Ok) {
    for (double ms : epoch_ms) {
      mpbench::EpochResult e;
      e.time_ms = ms;
      e.steps = 8;
      e.train_loss = e.eval_loss = 1;
      e.eval_accuracy = 0.5;
      r.epochs.push_back(e);
    }
    r.epoch_time_ms = mpbench::compute_time_stats(epoch_ms);
    r.samples_per_second = 256 / (r.epoch_time_ms.median / 1000);
  }
  r.memory.training_peak = r.memory.tracked_peak = memory;
  return r;
}

std::string write_history_file(const fs::path& dir, const std::string& name,
                               const nlohmann::json& provenance,
                               std::vector<mpbench::RunResult> runs,
                               std::vector<nlohmann::json> specs = {}) {
  mpbench::Report report;
  report.tool = {{"name", "mpbench"}, {"version", "test"}};
  report.provenance = provenance;
  report.env = {{"device", "cpu"}};
  report.runs = std::move(runs);
  report.specs = std::move(specs);
  const fs::path p = dir / name;
  std::ofstream(p) << mpbench::to_json(report).dump(2);
  return p.string();
}

json history_provenance(const std::string& time, const json& commit) {
  return {{"time_utc", time},
          {"host", "ci-host"},
          {"command", {"mpbench", "run", "x.json"}},
          {"commit", commit}};
}

// The page `report` renders of runs written as `name`.json.
std::string rendered(const fs::path& dir, const std::string& name,
                     std::vector<mpbench::RunResult> runs) {
  const std::string file = write_history_file(
      dir, name + ".json", history_provenance("2025-03-01T09:00:00Z", "abc1234"), std::move(runs));
  const fs::path html = dir / (name + ".html");
  const Result r =
      sh(std::string(MPBENCH_EXE) + " report " + file + " --html " + html.string(), dir);
  EXPECT_EQ(r.code, 0) << r.err;
  return read_file(html);
}

struct TrendPointRead {
  int x;
  std::string commit;
  double value, lo = NAN, hi = NAN;
};

// The points of the chart in the figure `id`, as the SVG carries them.
std::vector<TrendPointRead> trend_points(const std::string& html, const std::string& id) {
  const size_t at = html.find("id=\"" + id + "\"");
  EXPECT_NE(at, std::string::npos) << id;
  if (at == std::string::npos) return {};
  const std::string fig = html.substr(at, html.find("</figure>", at) - at);
  static const std::regex point(
      R"re(<circle class="trend-point"[^>]* data-x="(\d+)" data-commit="([^"]*)" data-value="([^"]*)"(?: data-lo="([^"]*)" data-hi="([^"]*)")?)re");
  std::vector<TrendPointRead> out;
  for (auto it = std::sregex_iterator(fig.begin(), fig.end(), point); it != std::sregex_iterator();
       ++it) {
    TrendPointRead p{std::stoi((*it)[1].str()), (*it)[2].str(), std::stod((*it)[3].str())};
    if ((*it)[4].matched) {
      p.lo = std::stod((*it)[4].str());
      p.hi = std::stod((*it)[5].str());
    }
    out.push_back(p);
  }
  return out;
}

TEST_F(ReportHtml, HistoryDrawsTrendsInTimeOrder) {
  using mpbench::RunStatus;
  const std::string a40(40, 'a'), b40(40, 'b'), c40(40, 'c');
  // Given newest first, then the oldest, then the middle one (its time with an offset: 10:00Z).
  const std::string c =
      write_history_file(dir_, "c.json", history_provenance("2025-03-03T10:00:00Z", c40),
                         {history_run("fp32", {9.5, 9.75, 10}, 1048576),
                          history_run("amp_bf16", {5, 5.25, 6}, 500000)});
  const std::string a = write_history_file(
      dir_, "a.json", history_provenance("2025-03-01T09:00:00Z", a40),
      {history_run("fp32", {10, 10.5, 12}, 1000000), history_run("amp_bf16", {5.5, 6, 7}, 600000)});
  // run --repeat 3: fp32's repetitions have medians 11, 10 and 12.5; amp_bf16 ran out of memory
  // each time.
  const std::string b =
      write_history_file(dir_, "b.json", history_provenance("2025-03-02T12:00:00+02:00", b40),
                         {history_run("fp32", {10.5, 11, 11.5}, 1000000, 1),
                          history_run("amp_bf16", {}, 700000, 1, RunStatus::Oom),
                          history_run("fp32", {9, 10, 10.5}, 999000, 2),
                          history_run("amp_bf16", {}, 700000, 2, RunStatus::Oom),
                          history_run("fp32", {12, 12.5, 13}, 998000, 3),
                          history_run("amp_bf16", {}, 700000, 3, RunStatus::Oom)});

  const fs::path html_path = dir_ / "h.html", md_path = dir_ / "h.md";
  const Result r = mpbench("report --history " + c + " " + a + " " + b + " --html " +
                           html_path.string() + " --md " + md_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string html = read_file(html_path);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(count(html, "class=\"chart chart-history-time\""), 2u);
  EXPECT_EQ(count(html, "class=\"chart chart-history-memory\""), 2u);
  expect_finite_coordinates(html);

  const std::vector<std::string> commits = {"aaaaaaa", "bbbbbbb", "ccccccc"};
  auto expect_points = [&](const std::string& id, const std::vector<int>& xs,
                           const std::vector<double>& values, const std::vector<double>& los,
                           const std::vector<double>& his) {
    const std::vector<TrendPointRead> pts = trend_points(html, id);
    ASSERT_EQ(pts.size(), xs.size()) << id;
    for (size_t i = 0; i < pts.size(); ++i) {
      EXPECT_EQ(pts[i].x, xs[i]) << id << " point " << i;
      EXPECT_EQ(pts[i].commit, commits[xs[i]]) << id << " point " << i;
      EXPECT_DOUBLE_EQ(pts[i].value, values[i]) << id << " point " << i;
      if (los.empty()) {
        EXPECT_TRUE(std::isnan(pts[i].lo)) << id << " point " << i;
      } else {
        EXPECT_DOUBLE_EQ(pts[i].lo, los[i]) << id << " point " << i;
        EXPECT_DOUBLE_EQ(pts[i].hi, his[i]) << id << " point " << i;
      }
    }
  };
  // fp32: a single run's median and its epochs' range; the repeated file's median of medians
  // and their range; memory the training peak (the largest of the repetitions, the first's:
  // not the last's 998000).
  expect_points("trend-hist_mlp-fp32-cpu-b32-time", {0, 1, 2}, {10.5, 11, 9.75}, {10, 10, 9.5},
                {12, 12.5, 10});
  expect_points("trend-hist_mlp-fp32-cpu-b32-memory", {0, 1, 2}, {1000000, 1000000, 1048576}, {},
                {});
  // amp_bf16: no point at bbbbbbb, a cross saying why, and a note.
  expect_points("trend-hist_mlp-amp_bf16-cpu-b32-time", {0, 2}, {6, 5.25}, {5.5, 5}, {7, 6});
  expect_points("trend-hist_mlp-amp_bf16-cpu-b32-memory", {0, 2}, {600000, 500000}, {}, {});
  EXPECT_EQ(count(html,
                  "<g class=\"trend-status\" data-x=\"1\" data-commit=\"bbbbbbb\" "
                  "data-status=\"oom\">"),
            2u);
  EXPECT_NE(html.find("amp_bf16 · cpu · batch 32 at bbbbbbb (2025-03-02 10:00 UTC): oom: out of "
                      "memory (a gap)"),
            std::string::npos);
  // The axis: the short commits, oldest first, each with its date.
  const size_t chart = html.find("id=\"trend-hist_mlp-fp32-cpu-b32-time\"");
  const size_t pa = html.find(">aaaaaaa</text>", chart), pb = html.find(">bbbbbbb</text>", chart),
               pc = html.find(">ccccccc</text>", chart);
  ASSERT_NE(pc, std::string::npos);
  EXPECT_LT(pa, pb);
  EXPECT_LT(pb, pc);
  EXPECT_NE(html.find(">2025-03-02</text>", chart), std::string::npos);
  // The commits table names the full commits in time order.
  const size_t ta = html.find("<code>" + a40), tb = html.find("<code>" + b40),
               tc = html.find("<code>" + c40);
  ASSERT_NE(tc, std::string::npos);
  EXPECT_LT(ta, tb);
  EXPECT_LT(tb, tc);

  const std::string md = read_file(md_path);
  EXPECT_NE(md.find("### fp32 · cpu · batch 32"), std::string::npos) << md;
  const size_t ma = md.find("| aaaaaaa | 2025-03-01 | 10.5"),
               mb = md.find("| bbbbbbb | 2025-03-02 | 11"),
               mc = md.find("| ccccccc | 2025-03-03 | 9.75");
  ASSERT_NE(ma, std::string::npos) << md;
  EXPECT_LT(ma, mb);
  EXPECT_LT(mb, mc);
  EXPECT_NE(md.find("| bbbbbbb | 2025-03-02 | — | — |  | — | oom: out of memory |"),
            std::string::npos)
      << md;
}

// A commit measured twice is two points; a file written outside a git checkout is labelled by
// its name; the same time keeps the order given.
TEST_F(ReportHtml, HistoryKeepsReruns) {
  const std::string a40(40, 'a');
  const std::string first =
      write_history_file(dir_, "first.json", history_provenance("2025-03-01T09:00:00Z", a40),
                         {history_run("fp32", {10, 10, 10}, 1000)});
  const std::string rerun =
      write_history_file(dir_, "rerun.json", history_provenance("2025-03-01T09:30:00Z", a40),
                         {history_run("fp32", {11, 11, 11}, 1000)});
  const std::string nogit =
      write_history_file(dir_, "nogit.json", history_provenance("2025-03-01T09:30:00Z", nullptr),
                         {history_run("fp32", {12}, 1000)});  // one epoch: no range
  const fs::path html_path = dir_ / "h.html";
  const Result r = mpbench("report --history " + rerun + " " + nogit + " " + first + " --html " +
                           html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  const std::vector<TrendPointRead> pts = trend_points(html, "trend-hist_mlp-fp32-cpu-b32-time");
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_EQ(pts[0].commit, "aaaaaaa");
  EXPECT_DOUBLE_EQ(pts[0].value, 10);
  EXPECT_EQ(pts[1].commit, "aaaaaaa");
  EXPECT_DOUBLE_EQ(pts[1].value, 11);
  EXPECT_EQ(pts[2].commit, "nogit");
  EXPECT_DOUBLE_EQ(pts[2].value, 12);
  EXPECT_DOUBLE_EQ(pts[0].lo, 10);
  EXPECT_TRUE(std::isnan(pts[2].lo) && std::isnan(pts[2].hi));  // drawn as "12-12" it was
  EXPECT_NE(html.find("Commit aaaaaaa has 2 result files"), std::string::npos);
}

// A commit whose run was measured on a busy machine (host_load: busy) is a hollow time point,
// data-busy="true", with a note and the Markdown row saying so; a quiet run's point and every
// memory point stay as they are (memory does not depend on the machine's load). Of repetitions,
// how many were busy and the worst one's figures.
TEST_F(ReportHtml, HistoryDrawsABusyMachinesPointHollow) {
  const auto loaded = [](mpbench::RunResult r, double waited) {
    r.host_load = mpbench::test::host_load(2, 2, 0, waited, 0, 4);
    return r;
  };
  const std::string a40(40, 'a'), b40(40, 'b'), c40(40, 'c');
  const std::string a =
      write_history_file(dir_, "a.json", history_provenance("2025-03-01T09:00:00Z", a40),
                         {loaded(history_run("fp32", {10, 10, 10}, 1000), 0.05)});
  const std::string b =
      write_history_file(dir_, "b.json", history_provenance("2025-03-02T09:00:00Z", b40),
                         {loaded(history_run("fp32", {14, 14, 14}, 1000), 0.9)});
  const std::string c =
      write_history_file(dir_, "c.json", history_provenance("2025-03-03T09:00:00Z", c40),
                         {loaded(history_run("fp32", {10, 10, 10}, 1000, 1), 0.5),
                          loaded(history_run("fp32", {10, 10, 10}, 1000, 2), 0.05),
                          loaded(history_run("fp32", {10, 10, 10}, 1000, 3), 0.75)});
  const fs::path html_path = dir_ / "h.html", md_path = dir_ / "h.md";
  const Result r = mpbench("report --history " + a + " " + b + " " + c + " --html " +
                           html_path.string() + " --md " + md_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  ASSERT_EQ(trend_points(html, "trend-hist_mlp-fp32-cpu-b32-time").size(), 3u);
  EXPECT_EQ(count(html, "data-busy=\"true\""), 2u);
  const std::regex busy_point(
      R"re(<circle class="trend-point"[^>]* fill="#fff" stroke="[^"]+" stroke-width="1.5" data-x="(\d)"[^>]* data-busy="true")re");
  std::vector<std::string> xs;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), busy_point);
       it != std::sregex_iterator(); ++it)
    xs.push_back((*it)[1].str());
  EXPECT_EQ(xs, (std::vector<std::string>{"1", "2"}));
  EXPECT_NE(html.find("fp32 · cpu · batch 32 at bbbbbbb (2025-03-02 09:00 UTC): measured on a busy "
                      "machine (its 2 threads waited for a CPU 45% of the time): its time, a "
                      "hollow point, is unreliable"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("at ccccccc (2025-03-03 09:00 UTC): measured on a busy machine (at worst, "
                      "its 2 threads waited for a CPU 38% of the time; 2 of 3 runs)"),
            std::string::npos);
  const std::string md = read_file(md_path);
  EXPECT_NE(
      md.find("| bbbbbbb | 2025-03-02 | 14.00 | 14.00–14.00 | epochs | 1000 B | ok; measured on a "
              "busy machine (its 2 threads waited for a CPU 45% of the time) |"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| aaaaaaa | 2025-03-01 | 10.00 | 10.00–10.00 | epochs | 1000 B | ok |"),
            std::string::npos)
      << md;
}

// A commit that is no hash (a tag, a branch name) is no 7-character prefix of one: its label keeps
// its first 12 characters, then an ellipsis.
TEST_F(ReportHtml, HistoryLabelsACommitThatIsNoHashByItsFirst12Characters) {
  const std::string file = write_history_file(
      dir_, "rc.json", history_provenance("2025-03-01T09:00:00Z", "release-candidate-7"),
      {history_run("fp32", {10, 10, 10}, 1000)});
  const fs::path html_path = dir_ / "rc.html";
  ASSERT_EQ(mpbench("report --history " + file + " --html " + html_path.string()).code, 0);
  const std::vector<TrendPointRead> pts =
      trend_points(read_file(html_path), "trend-hist_mlp-fp32-cpu-b32-time");
  ASSERT_EQ(pts.size(), 1u);
  EXPECT_EQ(pts[0].commit, "release-cand…");
}

// A data-parallel run is another series than one process's at the same per-rank batch (fewer
// steps an epoch: a change of rank count read as a 35% speedup between commits), as compare keys
// them; the caption and the Markdown say the ranks.
TEST_F(ReportHtml, HistoryKeepsRankCountsApart) {
  const std::string a40(40, 'a'), b40(40, 'b');
  const std::string one =
      write_history_file(dir_, "one.json", history_provenance("2025-03-01T09:00:00Z", a40),
                         {history_run("fp32", {10, 10, 10}, 1000)});
  mpbench::RunResult dp = history_run("fp32", {6.5, 6.5, 6.5}, 1000);
  dp.data_parallel = mpbench::DataParallelResult{};
  dp.data_parallel->ranks = 2;
  const std::string two =
      write_history_file(dir_, "two.json", history_provenance("2025-03-02T09:00:00Z", b40), {dp});
  const fs::path html_path = dir_ / "h.html", md_path = dir_ / "h.md";
  const Result r = mpbench("report --history " + one + " " + two + " --html " + html_path.string() +
                           " --md " + md_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  const std::vector<TrendPointRead> single = trend_points(html, "trend-hist_mlp-fp32-cpu-b32-time");
  ASSERT_EQ(single.size(), 1u);
  EXPECT_DOUBLE_EQ(single[0].value, 10);
  const std::vector<TrendPointRead> ranks =
      trend_points(html, "trend-hist_mlp-fp32-cpu-b32-r2-time");
  ASSERT_EQ(ranks.size(), 1u);
  EXPECT_DOUBLE_EQ(ranks[0].value, 6.5);
  EXPECT_NE(read_file(md_path).find("cpu · batch 32 per rank, 2 ranks"), std::string::npos)
      << read_file(md_path);
}

// A data-parallel step drawn as compute and the exposed communication, which add up to the step
// (10 ms a step: 8 steps of an 80 ms epoch), with the share said beside the bar.
TEST_F(ReportHtml, DataParallelStepsSplitIntoComputeAndCommunication) {
  mpbench::RunResult dp = history_run("fp32", {80, 80, 80}, 1000);
  dp.data_parallel = mpbench::DataParallelResult{};
  dp.data_parallel->ranks = 2;
  dp.data_parallel->comm_ms_per_step = 2.5;
  const std::string html = rendered(dir_, "dp", {dp});
  const size_t at = html.find("chart chart-data-parallel");
  ASSERT_NE(at, std::string::npos);
  const std::string chart = html.substr(at);
  EXPECT_NE(chart.find("fp32 · 2 ranks: compute 7.500 ms"), std::string::npos) << chart;
  EXPECT_NE(chart.find("fp32 · 2 ranks: exposed communication 2.500 ms"), std::string::npos);
  EXPECT_NE(chart.find(">10 ms · 25% comm<"), std::string::npos);
}

// An edited config is another model under the same name: the trend joined its points as one
// series without a word, so that a wider MLP looked like a 200x regression. The page and the
// Markdown say at which commit the spec changed and where; an unchanged one says nothing.
TEST_F(ReportHtml, HistorySaysWhereTheSpecChanged) {
  auto spec = [](int hidden) {
    return json{{"name", "hist_mlp"}, {"model", {{"type", "mlp"}, {"hidden", {hidden}}}}};
  };
  const std::string a40(40, 'a'), b40(40, 'b'), c40(40, 'c');
  const std::string a =
      write_history_file(dir_, "a.json", history_provenance("2025-03-01T09:00:00Z", a40),
                         {history_run("fp32", {10, 10, 10}, 1000)}, {spec(32)});
  const std::string b =
      write_history_file(dir_, "b.json", history_provenance("2025-03-02T09:00:00Z", b40),
                         {history_run("fp32", {90, 90, 90}, 9000)}, {spec(512)});
  const std::string c =
      write_history_file(dir_, "c.json", history_provenance("2025-03-03T09:00:00Z", c40),
                         {history_run("fp32", {91, 91, 91}, 9000)}, {spec(512)});
  const fs::path html = dir_ / "h.html", md = dir_ / "h.md";
  const Result r = mpbench("report --history " + a + " " + b + " " + c + " --html " +
                           html.string() + " --md " + md.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string note =
      "The spec changed at bbbbbbb (2025-03-02 09:00 UTC): model.hidden[0]: 32 -&gt; 512: the "
      "points before and after it are of different models.";
  const std::string page = read_file(html);
  EXPECT_NE(page.find(note), std::string::npos) << page;
  EXPECT_EQ(page.find("The spec changed at ccccccc"), std::string::npos);
  EXPECT_NE(read_file(md).find("The spec changed at bbbbbbb (2025-03-02 09:00 UTC): "
                               "model.hidden\\[0\\]: 32 -&gt; 512"),
            std::string::npos)
      << read_file(md);
}

// A file of `run --repeat 3`: the time chart's tooltip and the table give each speedup's 95%
// interval (amp_bf16 at half fp32's time, so about 2x).
TEST_F(ReportHtml, RepeatedRunsShowTheSpeedupInterval) {
  std::vector<mpbench::RunResult> runs;
  for (int64_t i = 1; i <= 3; ++i) {
    const double f = 1 + 0.02 * static_cast<double>(i - 2);
    runs.push_back(history_run("fp32", {10 * f, 10.2 * f, 10.4 * f}, 1000, i));
    runs.push_back(history_run("amp_bf16", {5 * f, 5.1 * f, 5.2 * f}, 600, i));
  }
  const std::string html = rendered(dir_, "rep", runs);
  static const std::regex tip(R"re(speedup vs fp32 2\.00× \(95% CI ([0-9.]+)–([0-9.]+)\))re");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(html, m, tip)) << html.substr(0, 4000);
  EXPECT_LE(std::stod(m[1]), 2.0);
  EXPECT_GE(std::stod(m[2]), 2.0);
  EXPECT_NE(html.find("speedup (95% CI)"), std::string::npos);
  // The section counts every run, each repetition (it counted the 2 modes).
  EXPECT_NE(html.find("<p class=\"meta\">6 runs · device"), std::string::npos)
      << html.substr(html.find("class=\"meta\""), 120);
}

// The bars of repeated runs name the speedup their interval is of (the median of the rounds'
// ratios, as the tables give it), not the ratio of the modes' median times: here 2.00x against
// 11 / 5 = 2.20x.
TEST_F(ReportHtml, RepeatedRunsBarsNameTheirIntervalsEstimate) {
  std::vector<mpbench::RunResult> runs;
  const double fp32[] = {10, 12, 11}, bf16[] = {5, 4, 6.6};
  for (int64_t i = 0; i < 3; ++i) {
    runs.push_back(history_run("fp32", {fp32[i]}, 1000, i + 1));
    runs.push_back(history_run("amp_bf16", {bf16[i]}, 600, i + 1));
  }
  const std::string html = rendered(dir_, "rep", runs);
  EXPECT_NE(html.find("speedup vs fp32 2.00× (95% CI"), std::string::npos);
  EXPECT_NE(html.find(">2.00x ("), std::string::npos);  // the table's cell
  EXPECT_EQ(html.find("2.20×"), std::string::npos);
  // The captions say which ratio that is; a run without repetitions has no such words.
  EXPECT_NE(html.find("higher is better; bold: speedup over fp32 (of repetitions: the median of "
                      "the rounds' own ratios, not the bars')"),
            std::string::npos)
      << html.substr(html.find("Throughput"), 200);
  runs.resize(2);
  for (auto& r : runs) r.repetition.reset();
  EXPECT_EQ(rendered(dir_, "once", runs).find("of repetitions"), std::string::npos);
}

// Accuracy over seeds without fp32: the caption and the tooltips name the mode the differences
// are from.
TEST_F(ReportHtml, AccuracyOverSeedsNamesItsBaseline) {
  std::vector<mpbench::RunResult> runs;
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    for (const char* mode : {"tf32", "amp_bf16"}) {
      mpbench::RunResult r = history_run(mode, {10, 10.5}, 1000);
      r.seed = seed;
      // amp_bf16 0.5 and 0.7 points above tf32: mean +0.6, 95% interval +-12.706 x 0.1.
      r.final_accuracy = 0.9 + 0.01 * static_cast<double>(seed) +
                         (std::string(mode) == "amp_bf16" ? 0.003 + 0.002 * seed : 0.0);
      runs.push_back(r);
    }
  }
  const std::string html = rendered(dir_, "seeds", runs);
  EXPECT_NE(html.find("bold: difference from tf32 in points"), std::string::npos);
  EXPECT_NE(html.find("; vs tf32 +0.60 [-0.67, +1.87] (95% paired t)"), std::string::npos);
  EXPECT_EQ(html.find("fp32 "), std::string::npos);
}

// Long labels keep what tells their bars apart: the mode whole, and both ends of the file's name.
TEST(Svg, ShortenLabelKeepsTheModeAndBothEndsOfTheFile) {
  using mpbench::svg::shorten_label;
  EXPECT_EQ(shorten_label("amp_bf16 b16 · cpu-run1/run", 30), "amp_bf16 b16 · cpu-run1/run");
  const std::string a = shorten_label("amp_bf16 b16 · results_from_machine_alpha/run", 30);
  const std::string b = shorten_label("amp_bf16 b16 · results_from_machine_beta/run", 30);
  EXPECT_EQ(a, "amp_bf16 b16 · resu…_alpha/run");
  EXPECT_NE(a, b);
  // Characters, not bytes: "·" and "…" count one each.
  for (const std::string& s : {a, b, shorten_label(std::string(40, 'x'), 30),
                               shorten_label("ü" + std::string(40, 'y') + "ü", 30)}) {
    size_t chars = 0;
    for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
    EXPECT_EQ(chars, 30u) << s;
  }
}

// Files whose names differ only in the middle came out as one label on every bar: a chart's
// labels that would be the same show where they differ; the others are cut as before.
TEST(Svg, LabelsThatWouldBeTheSameShowWhereTheyDiffer) {
  const std::vector<std::string> labels = {"fp32 · nightly_results_2026_01_05_runner_a_final",
                                           "fp32 · nightly_results_2026_01_06_runner_a_final",
                                           "fp32 · other"};
  const std::vector<std::string> got = mpbench::svg::shorten_labels(labels, 30);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0], "fp32 · …_2026_01_05_runner_a_…");
  EXPECT_EQ(got[1], "fp32 · …_2026_01_06_runner_a_…");
  EXPECT_EQ(got[2], "fp32 · other");
  for (const std::string& s : {got[0], got[1]}) {
    size_t chars = 0;
    for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
    EXPECT_EQ(chars, 30u) << s;
  }
}

// Epoch-time bars of these values (ms), as the report's time chart draws them.
std::vector<mpbench::svg::Bar> time_bars(const std::vector<double>& ms) {
  std::vector<mpbench::svg::Bar> bars;
  for (double v : ms) {
    mpbench::svg::Bar b;
    b.label = "t";
    b.color = "#000";
    b.value = v;
    b.value_text = mpbench::svg::format_general(v) + " ms";
    bars.push_back(b);
  }
  return bars;
}

// The edges: the last tick is at or above the largest value (the axis ends there), a string of
// exactly n bytes is not cut, and two values 50x apart stay on a linear axis (two decades make
// a log one).
TEST(Svg, TicksCoverTheTopAndEdgesAreNotCut) {
  using namespace mpbench::svg;
  const std::vector<double> ticks = nice_ticks(0, 7.3, 4);
  ASSERT_FALSE(ticks.empty());
  EXPECT_GE(ticks.back(), 7.3);
  EXPECT_EQ(shorten(std::string(24, 'x'), 24), std::string(24, 'x'));
  const std::string chart =
      bar_chart("chart-time", time_bars({1.0, 50.0}), {"epoch time", format_general, 1});
  EXPECT_EQ(chart.find("(log scale)"), std::string::npos) << chart;
}

// Without fp32 the ratios are against the first mode, and the captions and tooltips name it (the
// console and Markdown tables' headers do).
TEST_F(ReportHtml, RatiosNameTheirBaselineWithoutFp32) {
  const std::vector<mpbench::RunResult> runs = {history_run("amp_bf16", {10, 10.2, 10.4}, 1000, 1),
                                                history_run("amp_fp16", {5, 5.1, 5.2}, 500, 1)};
  const std::string html = rendered(dir_, "half", runs);
  for (const char* label : {"bold: speedup over amp_bf16", "bold: ratio to amp_bf16",
                            "speedup vs amp_bf16 2.00×", "0.50× of amp_bf16"})
    EXPECT_NE(html.find(label), std::string::npos) << label;
  const size_t fp32 = html.find("fp32 ");
  EXPECT_EQ(fp32, std::string::npos) << html.substr(fp32 < 200 ? 0 : fp32 - 200, 260);
}

// Rates from a thousand up are in thousands (256 samples in 256 ms: "1k/s", not "1e+03/s").
TEST_F(ReportHtml, RatesFromAThousandAreInThousands) {
  const std::vector<mpbench::RunResult> runs = {history_run("fp32", {256, 256}, 1000),
                                                history_run("amp_bf16", {256.5, 256.5}, 1000)};
  const std::string html = rendered(dir_, "rates", runs);
  EXPECT_NE(html.find("class=\"value\">1k/s"), std::string::npos);
  EXPECT_NE(html.find("class=\"value\">998/s"), std::string::npos);
}

// Two machines' run.json: the bars, captions and environment lines name each by its folder (the
// stem alone was the same for both); so does a history point of a file outside a git checkout.
TEST_F(ReportHtml, SameFileNameInTwoFoldersIsToldApartByItsFolder) {
  std::vector<std::string> files;
  for (const char* machine : {"h100", "h200"}) {
    fs::create_directories(dir_ / machine);
    files.push_back(write_history_file(
        dir_, std::string(machine) + "/run.json",
        history_provenance("2025-03-01T09:00:00Z", nullptr),
        {history_run("fp32", {10, 10, 10}, 1000), history_run("amp_bf16", {5, 5, 5}, 600)}));
  }
  const fs::path html_path = dir_ / "two.html";
  Result r = mpbench("report " + files[0] + " " + files[1] + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  std::string html = read_file(html_path);
  for (const char* machine : {"h100", "h200"}) {
    const std::string name = std::string(machine) + "/run";
    for (const std::string& s :
         {">fp32 · " + name + "<", ">amp_bf16 · " + name + "<", "<caption>" + name + " · mpbench",
          std::string("<b>h100/run, h200/run</b>")})
      EXPECT_NE(html.find(s), std::string::npos) << s;
  }
  EXPECT_EQ(html.find("<caption>run · "), std::string::npos);

  r = mpbench("report --history " + files[0] + " " + files[1] + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  html = read_file(html_path);
  const std::vector<TrendPointRead> pts = trend_points(html, "trend-hist_mlp-fp32-cpu-b32-time");
  ASSERT_EQ(pts.size(), 2u);
  EXPECT_EQ(pts[0].commit, "h100/run");
  EXPECT_EQ(pts[1].commit, "h200/run");
}

// A sweep's table in the page: a failed row keeps its batch cell, and a note names its batch.
TEST_F(ReportHtml, SweepTableKeepsTheBatchOfFailedRowsAndNotes) {
  std::vector<mpbench::RunResult> runs;
  for (int64_t batch : {32, 64}) {
    runs.push_back(history_run("fp32", {10, 10, 10}, 1000));
    runs.push_back(batch == 32
                       ? history_run("amp_bf16", {5, 9, 5}, 600)
                       : history_run("amp_bf16", {}, 600, std::nullopt, mpbench::RunStatus::Oom));
    runs[runs.size() - 2].batch_size = runs.back().batch_size = batch;
  }
  const std::string html = rendered(dir_, "sweep", runs);
  EXPECT_NE(html.find("<tr><td>amp_bf16</td><td class=\"num\">64</td><td class=\"status-cell "
                      "status-oom\" colspan=\""),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<li>note: amp_bf16 batch 32: epoch times vary"), std::string::npos);
  expect_rows_fill_their_tables(html);
}

// A sweep beside a file of one batch: the speedup-by-batch chart's lines name their file where
// two would share a mode's name (the bars' labels differ already, by the sweep's batch).
TEST_F(ReportHtml, SweepChartLinesOfTwoFilesNameTheirFile) {
  std::vector<mpbench::RunResult> one = {history_run("fp32", {10, 10, 10}, 1000),
                                         history_run("amp_bf16", {5, 5, 5}, 600)};
  std::vector<mpbench::RunResult> sweep;
  for (int64_t batch : {32, 64}) {
    sweep.push_back(history_run("fp32", {10, 10, 10}, 1000));
    sweep.push_back(history_run("amp_bf16", {4, 4, 4}, 600));
    sweep[sweep.size() - 2].batch_size = sweep.back().batch_size = batch;
  }
  const auto prov = history_provenance("2025-03-01T09:00:00Z", nullptr);
  const std::string a = write_history_file(dir_, "single.json", prov, one);
  const std::string b = write_history_file(dir_, "sweep.json", prov, sweep);
  const fs::path html_path = dir_ / "sweep2.html";
  const Result r = mpbench("report " + a + " " + b + " --html " + html_path.string());
  ASSERT_EQ(r.code, 0) << r.err;
  const std::string html = read_file(html_path);
  const size_t chart = html.find("Speedup over fp32 against batch size");
  ASSERT_NE(chart, std::string::npos) << html;
  const std::string section = html.substr(chart, html.find("</figure>", chart) - chart);
  for (const char* name : {">amp_bf16 · single<", ">amp_bf16 · sweep<"})
    EXPECT_NE(section.find(name), std::string::npos) << name << "\n" << section;
}

TEST(HtmlReport, ShortFileNamesAreTheShortestEndsThatDiffer) {
  using mpbench::short_file_names;
  using V = std::vector<std::string>;
  EXPECT_EQ(short_file_names({"a.json", "results/b.json"}), (V{"a", "b"}));
  EXPECT_EQ(short_file_names({"h100/run.json", "h200/run.json"}), (V{"h100/run", "h200/run"}));
  EXPECT_EQ(short_file_names({"a/x.json", "b/x.json", "y.json"}), (V{"a/x", "b/x", "y"}));
  EXPECT_EQ(short_file_names({"/r/a/m/x.json", "/r/b/m/x.json"}), (V{"a/m/x", "b/m/x"}));
  EXPECT_EQ(short_file_names({"x.json", "m/x.json"}), (V{"x", "m/x"}));
  EXPECT_EQ(short_file_names({"./x.json", "d/./y.json"}), (V{"x", "y"}));
  // Nothing shorter than the path tells them apart.
  EXPECT_EQ(short_file_names({"d/x.json", "d/x.out"}), (V{"d/x.json", "d/x.out"}));
}

TEST_F(ReportHtml, HistoryBadInputsExit2) {
  const std::string good =
      write_history_file(dir_, "good.json", history_provenance("2025-03-01T09:00:00Z", "abc1234"),
                         {history_run("fp32", {10, 10, 10}, 1000)});
  const std::string old =
      write_history_file(dir_, "old.json", nullptr, {history_run("fp32", {10, 10, 10}, 1000)});
  const std::string when =
      write_history_file(dir_, "when.json", history_provenance("yesterday", "abc1234"),
                         {history_run("fp32", {10, 10, 10}, 1000)});
  const std::string no_zone =
      write_history_file(dir_, "nozone.json", history_provenance("2025-03-01T09:00:00", "abc1234"),
                         {history_run("fp32", {10, 10, 10}, 1000)});
  // 2100 is no leap year (a century not of 400): it has no February 29.
  const std::string no_leap =
      write_history_file(dir_, "noleap.json", history_provenance("2100-02-29T00:00:00Z", "abc1234"),
                         {history_run("fp32", {10, 10, 10}, 1000)});
  const fs::path other = dir_ / "other.json";
  std::ofstream(other) << R"({"hello": "world"})";
  const fs::path profile = dir_ / "profile.json";
  std::ofstream(profile)
      << R"({"schema_version": 1, "spec": {"name": "hist_mlp"}, "profiles": []})";
  const std::string out = (dir_ / "o.html").string();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"report --history --html " + out, "results"},
      {"report --history " + good + " " + other.string() + " --html " + out, "other.json"},
      {"report --history " + good + " " + profile.string() + " --html " + out, "a profile file"},
      {"report --history " + good + " " + old + " --html " + out, "old.json has no provenance"},
      {"report --history " + good + " " + when + " --html " + out,
       "when.json: provenance.time_utc: expected an ISO 8601 time"},
      {"report --history " + no_zone + " --html " + out, "nozone.json: provenance.time_utc"},
      {"report --history " + no_leap + " --html " + out, "noleap.json: provenance.time_utc"},
      {"report --history " + good, "--html"},
  };
  for (const auto& [args, fragment] : cases) {
    const Result r = mpbench(args);
    EXPECT_EQ(r.code, 2) << args << "\n" << r.err;
    EXPECT_EQ(count(r.err, "\n"), 1u) << r.err;
    EXPECT_NE(r.err.find(fragment), std::string::npos) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(out)) << args;
  }
}

}  // namespace

namespace mpbench {
namespace {

using namespace svg;

// The report's bar charts (issue 29): every value and note ends inside the chart, values spanning
// more than two decades go on a log axis (a tool 300x slower beside mpbench), and a bar that is
// absent for want of seeds is grey text, not a failure's red.
TEST(BarChart, LabelsFitTheChartAndDecadesGoOnALogAxis) {
  std::vector<Bar> bars;
  for (double v : {97.46, 97.5, 96.0}) {
    Bar b;
    b.label = "mpbench amp_bf16 · seeds";
    b.color = "#000";
    b.value = v;
    b.whisker = std::make_pair(v - 0.7, v + 0.7);
    b.value_text = "97.46% ± 0.55";
    b.note = "+0.10 [-1.14, +1.34]";
    bars.push_back(b);
  }
  Bar absent;
  absent.label = "once";
  absent.drawn = false;
  absent.note = "trained once, no seeds (run --seeds N)";
  bars.push_back(absent);
  const std::string linear = bar_chart("chart-accuracy", bars, {"accuracy", format_general, 1});
  // <text x="X" ... class="value">VALUE<tspan ...>NOTE</tspan>: about 7.6 px a character.
  const std::regex value(
      R"re(<text x="([0-9.]+)" y="[0-9.]+" class="value">([^<]*)<tspan[^>]*>([^<]*)</tspan>)re");
  int seen = 0;
  for (std::sregex_iterator it(linear.begin(), linear.end(), value), end; it != end; ++it, ++seen) {
    const double x = std::stod((*it)[1]);
    const double width =
        7.6 * double((*it)[2].length() - 1 + (*it)[3].length()) + 6;  // ± is 2 bytes
    EXPECT_LE(x + width, kBarW) << (*it)[0];
  }
  EXPECT_EQ(seen, 3);
  EXPECT_NE(linear.find("class=\"absent\" text-anchor=\"start\">trained once"), std::string::npos)
      << linear;
  EXPECT_EQ(linear.find("(log scale)"), std::string::npos);

  std::vector<Bar> times = time_bars({1.1, 344.5});
  const std::string log = bar_chart("chart-time", times, {"epoch time", format_general, 1});
  EXPECT_NE(log.find("epoch time (log scale)"), std::string::npos);
  // Ticks at powers of ten from 0.1 to 1000: the small bar is visible, not a sliver.
  for (const char* tick : {">0.1<", ">1<", ">10<", ">100<", ">1000<"})
    EXPECT_NE(log.find(tick), std::string::npos) << tick;
  const std::regex rect(R"re(<rect x="[0-9.]+" y="[0-9.]+" width="([0-9.]+)")re");
  std::vector<double> widths;
  for (std::sregex_iterator it(log.begin(), log.end(), rect), end; it != end; ++it)
    widths.push_back(std::stod((*it)[1]));
  ASSERT_EQ(widths.size(), 2u);
  EXPECT_GT(widths[0], 10);  // on a linear axis 1.1 of 344.5 would be under 1 px

  // Values across the whole double range (hand-edited files): an axis of ten-odd ticks, drawn at
  // once (the decade loop once ran to 10^309, infinite, and never ended).
  times[0].value = 1e-300;
  times[1].value = 1.7e308;
  const std::string wide = bar_chart("chart-time", times, {"samples/s", format_general, 1});
  EXPECT_NE(wide.find("samples/s (log scale)"), std::string::npos);
  const size_t lines = static_cast<size_t>(std::count(wide.begin(), wide.end(), '\n'));
  EXPECT_LT(lines, 60u) << wide;
}

// A log axis of bytes shown in MiB has its ticks at 0.1, 1, 10, 100 MiB, not at powers of ten of
// bytes (0.0953674, 0.953674, ... MiB), and a bar of 100 MiB ends on the 100 tick.
TEST(BarChart, LogTicksAreRoundInTheDisplayedUnit) {
  const double mib = 1 << 20;
  std::vector<Bar> bars;
  for (double v : {0.5 * mib, 100 * mib}) {
    Bar b;
    b.label = "m";
    b.color = "#000";
    b.value = v;
    b.value_text = format_general(v / mib) + " MiB";
    bars.push_back(b);
  }
  const std::string svg = bar_chart("chart-memory", bars, {"memory (MiB)", format_general, mib});
  ASSERT_NE(svg.find("(log scale)"), std::string::npos);
  const std::regex tick(R"re(<text x="([0-9.]+)" y="[0-9.]+" class="tick"[^>]*>([^<]*)<)re");
  std::vector<std::string> labels;
  double x100 = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), tick), end; it != end; ++it) {
    labels.push_back((*it)[2]);
    if ((*it)[2] == "100") x100 = std::stod((*it)[1]);
  }
  EXPECT_EQ(labels, (std::vector<std::string>{"0.1", "1", "10", "100"})) << svg;
  const std::regex rect(R"re(<rect x="([0-9.]+)" y="[0-9.]+" width="([0-9.]+)")re");
  std::vector<double> ends;
  for (std::sregex_iterator it(svg.begin(), svg.end(), rect), end; it != end; ++it)
    ends.push_back(std::stod((*it)[1]) + std::stod((*it)[2]));
  ASSERT_EQ(ends.size(), 2u);
  EXPECT_NEAR(ends[1], x100, 0.15);
}

}  // namespace
}  // namespace mpbench
