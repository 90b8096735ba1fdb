#include "app/progress.h"

#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "app/console_table.h"  // display_width
#include "app/output_file.h"    // interrupt_requested

namespace mpbench {

namespace {

constexpr double kShowAfterS = 1.0;
constexpr double kRedrawEveryS = 0.1;
constexpr double kTimerRedrawS = 1.0;  // the timer's, a second after the last draw

int terminal_width() {
  struct winsize ws {};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}

std::string format_duration(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const int64_t t = static_cast<int64_t>(std::llround(s));
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, (t / 60) % 60, t % 60);
  return fmt::format("{}:{:02}", t / 60, t % 60);
}

// Cuts to `cols` code points; the suffix may carry UTF-8 and must not be split mid-character.
std::string cut(const std::string& s, int cols) {
  int n = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (n == cols) return s.substr(0, i);
      ++n;
    }
  }
  return s;
}

}  // namespace

Progress::Progress(std::string label, int64_t total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled && total > 0) {
  start_ = Clock::now();
  last_draw_ = start_;
  if (enabled_) timer_ = std::thread([this] { tick(); });
}

Progress::~Progress() {
  finish();
}

bool Progress::stderr_is_tty() {
  // A dumb terminal shows the bar's erase sequence as junk: it gets the lines a pipe gets.
  const char* term = std::getenv("TERM");
  return ::isatty(STDERR_FILENO) == 1 && !(term && std::string(term) == "dumb");
}

std::string Progress::format_line(const std::string& label, int64_t done, int64_t total,
                                  double elapsed_s, const std::string& suffix, int width) {
  done = std::clamp<int64_t>(done, 0, std::max<int64_t>(total, 0));
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 0.0;
  const double eta = done > 0 ? elapsed_s * static_cast<double>(total - done) / done : NAN;
  const std::string pct = fmt::format("{:3.0f}% ", std::floor(frac * 100));
  const std::string counts = fmt::format(" {}/{}", done, total);
  const std::string eta_text = " ETA " + format_duration(eta);
  const std::string extra = suffix.empty() ? "" : "  " + suffix;
  const int max_cols = std::max(width - 1, 10);
  // Where the line is too long, whole fields go, the least telling first (the suffix, the ETA),
  // then the label is cut: the percentage and the counts always show, and no number is cut in
  // half ("loss 1" for 1.471 at 80 columns).
  auto cols = [](const std::string& t) { return static_cast<int>(display_width(t)); };
  std::string tail = counts + eta_text + extra;
  if (cols(label) + 1 + cols(pct) + cols(tail) > max_cols) tail = counts + eta_text;
  if (cols(label) + 1 + cols(pct) + cols(tail) > max_cols) tail = counts;
  const int label_room = max_cols - 1 - cols(pct) - cols(tail);
  const std::string head =
      (cols(label) > label_room ? cut(label, std::max(label_room, 0)) : label) + " " + pct;
  const int room = max_cols - cols(head) - cols(tail) - 2;
  std::string line = head;
  if (room >= 10) {
    const int bar = std::min(room, 30);
    const int filled = static_cast<int>(std::floor(frac * bar));
    line += "[" + std::string(filled, '#') + std::string(bar - filled, '.') + "]";
  }
  line += tail;
  return cut(line, max_cols);
}

void Progress::update(int64_t done, const std::string& suffix) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!enabled_) return;
  done_ = done;
  suffix_ = suffix;
  const Clock::time_point now = Clock::now();
  if (std::chrono::duration<double>(now - start_).count() < kShowAfterS) return;
  if (drawn_ && std::chrono::duration<double>(now - last_draw_).count() < kRedrawEveryS) return;
  draw(now);
}

void Progress::draw(Clock::time_point now) {
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // Two columns short of the width: the terminal's echo of a Ctrl-C ("^C") after a bar as wide
  // as the line wrapped, and the interrupt's erase cleared the new line, not the bar.
  const std::string line = format_line(label_, done_, total_, elapsed,
                                       interrupt_requested() ? "stopping after this step" : suffix_,
                                       terminal_width() - 2);
  // \r back to the start, then erase to the end of the line so a shorter line leaves no residue.
  std::fprintf(stderr, "\r%s\x1b[K", line.c_str());
  std::fflush(stderr);
  drawn_ = true;
  last_draw_ = now;
}

void Progress::tick() {
  // Interrupts are the main thread's (it removes temporary files and erases the bar).
  sigset_t block;
  sigemptyset(&block);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, sig);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  const auto show_at = start_ + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(kShowAfterS));
  const auto every =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(kTimerRedrawS));
  std::unique_lock<std::mutex> lock(mu_);
  while (enabled_) {
    // A second after the last draw, or after the moment the bar may first show.
    const Clock::time_point due = std::max(show_at, last_draw_) + every;
    if (wake_.wait_until(lock, due, [this] { return !enabled_; })) break;
    const Clock::time_point now = Clock::now();
    if (now >= std::max(show_at, last_draw_) + every) draw(now);
  }
}

void Progress::finish() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    enabled_ = false;  // work is over: a late update() must not draw a stale bar
  }
  wake_.notify_all();
  if (timer_.joinable()) timer_.join();
  if (!drawn_) return;
  std::fputs("\r\x1b[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

RunPlan::RunPlan(bool quiet, std::function<Clock::time_point()> now)
    : lines_(!quiet && !Progress::stderr_is_tty()), now_(std::move(now)) {
  last_ = now_();
}

void RunPlan::add(const std::string& spec, int64_t batch, double work) {
  Spec& s = specs_[{spec, batch}];
  s.work_left += work;
  ++s.runs;
  ++runs_;
}

std::string RunPlan::position(int64_t spec, int64_t specs, int64_t mode, int64_t modes) {
  return fmt::format("spec {}/{}, mode {}/{}", spec, specs, mode, modes);
}

std::string RunPlan::format_done(int64_t index, int64_t runs, const std::string& what,
                                 const std::string& status, double run_s, Left left) {
  std::string s =
      fmt::format("mpbench: [{}/{}] {}: {} in {:.1f} s", index, runs, what, status, run_s);
  if (index >= runs) return s;
  auto count = [](int n, const char* what) {
    return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
  };
  // A sweep's rates are per batch size: its untimed runs are counted by batch size, not by spec.
  std::string untimed;
  if (left.untimed_batches > 0)
    untimed = count(left.untimed_batches, "batch size") +
              (left.untimed_specs > 1 ? " of " + count(left.untimed_specs, "spec") : "") +
              " not timed yet";
  else if (left.untimed_specs > 0)
    untimed = count(left.untimed_specs, "spec") + " not timed yet";
  if (std::isnan(left.seconds)) return s + (untimed.empty() ? "" : "; " + untimed);
  s += "; about " + format_duration(left.seconds) + " left";
  return untimed.empty() ? s : s + ", besides " + untimed;
}

RunPlan::Left RunPlan::left() const {
  Left l{done_runs_ >= runs_ ? 0.0 : NAN, 0};
  std::set<std::string> names, untimed;
  int untimed_batches = 0;
  for (const auto& [key, s] : specs_) {
    names.insert(key.first);
    if (s.done_runs == s.runs) continue;
    if (s.timed_work > 0) {
      l.seconds =
          (std::isnan(l.seconds) ? 0.0 : l.seconds) + s.timed_s * s.work_left / s.timed_work;
    } else if (s.work_left > 0) {
      untimed.insert(key.first);
      ++untimed_batches;
    } else if (std::isnan(l.seconds)) {
      l.seconds = 0;  // only runs of no work left there: done at once
    }
  }
  l.untimed_specs = static_cast<int>(untimed.size());
  if (names.size() < specs_.size()) l.untimed_batches = untimed_batches;  // a sweep
  return l;
}

void RunPlan::starting() {
  last_ = now_();
}

void RunPlan::done(const std::string& spec, int64_t batch, const std::string& what,
                   const std::string& status, double work, bool timed) {
  const Clock::time_point now = now_();
  const double run_s = std::chrono::duration<double>(now - last_).count();
  last_ = now;
  Spec& s = specs_[{spec, batch}];
  ++s.done_runs;
  ++done_runs_;
  s.work_left = std::max(0.0, s.work_left - work);
  if (timed && work > 0) {
    s.timed_work += work;
    s.timed_s += run_s;
  }
  if (!lines_) return;
  std::fprintf(stderr, "%s\n", format_done(done_runs_, runs_, what, status, run_s, left()).c_str());
  std::fflush(stderr);
}

Dataset make_dataset_with_progress(const Spec& spec, bool enabled) {
  Progress bar(spec.name + " data", spec.data.train_samples + spec.data.eval_samples, enabled);
  // No stop here: the generators' threads are still running (the run stops after the data).
  return make_dataset(spec, [&](int64_t done, int64_t) { bar.update(done); });
}

}  // namespace mpbench
