#include "app/svg.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "app/console_table.h"
#include "train/printable.h"

namespace mpbench {

std::string html_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    // Controls, which HTML does not allow (a file's status_detail may hold an escape sequence),
    // shown as C writes them; tab and line breaks are the page's white space.
    if (const size_t n = append_control_escape(s, i, "\\", out)) {
      i += n - 1;
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace svg {

// An SVG coordinate. Non-finite values never reach here by construction; clamping keeps a bug
// from producing an unparsable attribute.
std::string px(double v) {
  if (!std::isfinite(v)) v = 0;
  std::string s = fmt::format("{:.1f}", v);
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  if (s == "-0") s = "0";
  return s;
}

std::string format_general(double v) {
  if (v == 0) return "0";
  const double a = std::fabs(v);
  if (a >= 1e4 || a < 1e-3) return fmt::format("{:.0e}", v);
  return fmt::format("{:g}", v);
}

// 2¹⁶ for e = 16: loss scales are powers of two, and 65536 reads worse than its exponent.
std::string power_of_two(double e) {
  static const char* kSup[] = {"⁰", "¹", "²", "³", "⁴", "⁵", "⁶", "⁷", "⁸", "⁹"};
  const long long n = std::llround(e);
  std::string digits = std::to_string(n < 0 ? -n : n), out = "2";
  if (n < 0) out += "⁻";
  for (char c : digits) out += kSup[c - '0'];
  return out;
}

std::string shorten(const std::string& s, size_t n) {
  if (s.size() <= n) return s;
  size_t cut = n;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;  // UTF-8 boundary
  return s.substr(0, cut) + "…";
}

namespace {

// The UTF-8 sequences of s, one string a character.
std::vector<std::string> characters(const std::string& s) {
  std::vector<std::string> out;
  for (unsigned char c : s) {
    if (out.empty() || (c & 0xC0) != 0x80) out.emplace_back();
    out.back() += static_cast<char>(c);
  }
  return out;
}

std::string joined(std::vector<std::string>::const_iterator a,
                   std::vector<std::string>::const_iterator b) {
  std::string out;
  for (; a != b; ++a) out += *a;
  return out;
}

}  // namespace

// What a label's mode and file are joined by ("fp32 · h100/run"): 3 characters, 4 bytes.
const std::string kLabelDot = " · ";

std::string shorten_label(const std::string& s, size_t n) {
  const std::vector<std::string> cs = characters(s);
  if (cs.size() <= n || n < 3) return cs.size() <= n ? s : shorten(s, n);
  // What tells a bar from its neighbours is often its end (the file of "fp32 · h100/run" beside
  // "fp32 · h200/run"): keep the part before the first " · " whole when it leaves room, and cut
  // the rest a third of the way in.
  const size_t dot = s.find(kLabelDot);
  const size_t head = dot == std::string::npos ? 0 : characters(s.substr(0, dot)).size();
  const size_t keep_front = head && head + 8 <= n ? head + 3 + (n - head - 3 - 1) / 3 : (n - 1) / 2;
  const size_t keep_back = n - 1 - keep_front;
  return joined(cs.begin(), cs.begin() + keep_front) + "…" + joined(cs.end() - keep_back, cs.end());
}

std::vector<std::string> shorten_labels(const std::vector<std::string>& labels, size_t n) {
  std::vector<std::string> out;
  for (const std::string& l : labels) out.push_back(shorten_label(l, n));
  std::vector<std::string> fixed = out;
  for (size_t i = 0; i < labels.size(); ++i) {
    // Where another label came out the same, show the part where they differ.
    const std::vector<std::string> ci = characters(labels[i]);
    size_t differ = ci.size();
    bool clash = false;
    for (size_t j = 0; j < labels.size(); ++j) {
      if (j == i || out[j] != out[i] || labels[j] == labels[i]) continue;
      clash = true;
      const std::vector<std::string> cj = characters(labels[j]);
      size_t k = 0;
      while (k < ci.size() && k < cj.size() && ci[k] == cj[k]) ++k;
      differ = std::min(differ, k);
    }
    if (!clash || n < 8) continue;
    // The mode before " · " whole where it leaves room, then a window from half the room
    // before the first difference: "fp32 · …_2026_01_05_runner_a_…".
    const size_t dot = labels[i].find(kLabelDot);
    size_t head = dot == std::string::npos
                      ? 0
                      : characters(labels[i].substr(0, dot + kLabelDot.size())).size();
    if (head + 8 > n) head = 0;
    const size_t room = n - head - 2;  // two ellipses at most
    size_t start = differ > room / 2 ? differ - room / 2 : 0;
    start = std::max(start, head);
    if (start + room > ci.size()) start = ci.size() > room ? ci.size() - room : 0;
    start = std::max(start, head);
    const size_t end = std::min(ci.size(), start + room);
    fixed[i] = joined(ci.begin(), ci.begin() + head) + (start > head ? "…" : "") +
               joined(ci.begin() + start, ci.begin() + end) + (end < ci.size() ? "…" : "");
  }
  return fixed;
}

// Round-number ticks from the first at or above `lo` to the first at or above `hi`, so an axis
// that ends at the last tick covers every value.
std::vector<double> nice_ticks(double lo, double hi, int target) {
  // Values that add up past the largest double (a hand-edited file) still get an axis.
  if (!std::isfinite(lo) || !std::isfinite(hi) || !std::isfinite(hi - lo)) lo = 0, hi = 1;
  if (!(hi > lo)) hi = lo + 1;
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0}) {
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  }
  std::vector<double> ticks;
  const double first = std::ceil(lo / step - 1e-9), last = std::ceil(hi / step - 1e-9);
  for (double k = first; k <= last; k += 1) ticks.push_back(k == 0 ? 0 : k * step);
  return ticks;
}

std::string svg_open(const std::string& kind, double w, double h, const std::string& label) {
  return fmt::format(
      "<svg class=\"chart {}\" viewBox=\"0 0 {} {}\" width=\"{}\" height=\"{}\" role=\"img\" "
      "aria-label=\"{}\" xmlns=\"http://www.w3.org/2000/svg\">\n",
      kind, px(w), px(h), px(w), px(h), html_escape(label));
}

std::string text(double x, double y, const std::string& s, const std::string& cls,
                 const char* anchor) {
  return fmt::format("<text x=\"{}\" y=\"{}\" class=\"{}\" text-anchor=\"{}\">{}</text>\n", px(x),
                     px(y), cls, anchor, html_escape(s));
}

namespace {

// About how wide a label of the charts' 12 px font is (bold digits included, measured in
// Chromium): the bar charts leave room for it.
double text_width(const std::string& s) {
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xc0) != 0x80 ? 1 : 0;
  return 7.6 * double(chars);
}

}  // namespace

std::string bar_chart(const std::string& kind, const std::vector<Bar>& bars, const Axis& axis) {
  double max_v = 0, min_v = INFINITY;
  for (const Bar& b : bars) {
    if (b.drawn && std::isfinite(b.value)) max_v = std::max(max_v, b.value);
    if (b.drawn && std::isfinite(b.value) && b.value > 0) min_v = std::min(min_v, b.value);
    if (b.whisker && std::isfinite(b.whisker->second)) max_v = std::max(max_v, b.whisker->second);
    if (b.marker && std::isfinite(*b.marker)) max_v = std::max(max_v, *b.marker);
  }
  if (!(max_v > 0)) max_v = 1;
  // Values spanning more than two decades (mpbench beside a tool 100x slower) on a log axis, so
  // that the smaller bars do not vanish.
  const bool log = std::isfinite(min_v) && max_v / min_v > 100;
  // The log axis's decades are of the displayed unit (1, 10, 100 MiB, not 10^n bytes), as
  // exponents: 10^309, over a value near the largest double (a hand-edited file), is infinite and
  // would end no loop over the decades.
  auto decades = [&](double v) { return std::log10(v) - std::log10(axis.scale); };
  // The smallest bar spans at least a third of a decade.
  const double lo = log ? std::floor(decades(min_v) - 0.3) : 0;
  const double top_e = log ? std::ceil(decades(max_v)) : 0;
  const std::vector<double> ticks = nice_ticks(0, max_v / axis.scale, 4);
  const double top_v = std::max(max_v, ticks.back() * axis.scale);
  const double x0 = kBarLeft;
  const double h = kBarTop + bars.size() * kBarRow + kBarBottom;
  const double y_axis = kBarTop + bars.size() * kBarRow;
  auto frac = [&](double v) {
    if (!log) return std::clamp(v / top_v, 0.0, 1.0);
    return v > 0 ? std::clamp((decades(v) - lo) / (top_e - lo), 0.0, 1.0) : 0.0;
  };
  // The plot is as wide as lets every bar's value and note end inside the chart.
  double pw = kBarW - kBarLeft - kBarRight;
  for (const Bar& b : bars) {
    if (!b.drawn || !std::isfinite(b.value)) continue;
    double end = b.value;
    if (b.whisker && std::isfinite(b.whisker->second)) end = std::max(end, b.whisker->second);
    const double label = 6 + text_width(b.value_text) +
                         (b.note.empty() ? 0 : 6 + text_width(shorten(b.note, 24))) + 4;
    if (frac(end) > 0) pw = std::min(pw, (kBarW - x0 - label) / frac(end));
  }
  pw = std::max(pw, 90.0);
  auto xs = [&](double v) { return x0 + pw * frac(v); };

  std::string s = svg_open(kind, kBarW, h, axis.label + (log ? " (log scale)" : ""));
  // (position, displayed value): a log tick's is the power of ten itself, not a value in data
  // units divided back, which rounds off it.
  std::vector<std::pair<double, double>> tick_at;
  if (log) {
    // A tick a decade, or every few decades where values span hundreds of them.
    const double step = std::max(1.0, std::ceil((top_e - lo) / 10));
    for (double e = lo; e <= top_e; e += step)
      tick_at.emplace_back(x0 + pw * (e - lo) / (top_e - lo), std::pow(10.0, e));
  } else {
    for (double t : ticks) tick_at.emplace_back(xs(t * axis.scale), t);
  }
  for (const auto& [x, v] : tick_at) {
    s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", px(x),
                     px(x), px(kBarTop - 4), px(y_axis));
    s += text(x, y_axis + 15, axis.tick_text(v), "tick", "middle");
  }
  s += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", px(x0),
                   px(x0), px(kBarTop - 4), px(y_axis));
  s += text(x0 + pw / 2, h - 8, axis.label + (log ? " (log scale)" : ""), "axis-label", "middle");

  std::vector<std::string> labels;
  for (const Bar& b : bars) labels.push_back(b.label);
  labels = shorten_labels(labels, 30);
  for (size_t i = 0; i < bars.size(); ++i) {
    const Bar& b = bars[i];
    const double y = kBarTop + i * kBarRow + 4, bh = kBarRow - 8, cy = y + bh / 2 + 4;
    s += "<g class=\"bar\">";
    s += "<title>" + html_escape(b.tooltip) + "</title>\n";
    s += text(x0 - 8, cy, labels[i], "bar-label", "end");
    if (b.drawn && std::isfinite(b.value)) {
      const double x1 = xs(b.value);
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" rx=\"2\" fill=\"{}\"{}/>\n", px(x0),
          px(y), px(std::max(1.0, x1 - x0)), px(bh), b.color,
          b.faded ? " fill-opacity=\"0.35\" stroke-dasharray=\"3 2\" stroke=\"#9a3412\"" : "");
      double label_x = x1 + 6;
      if (b.whisker && std::isfinite(b.whisker->first) && std::isfinite(b.whisker->second)) {
        const double wa = xs(b.whisker->first), wb = xs(b.whisker->second);
        s += fmt::format("<path class=\"whisker\" d=\"M{} {}H{}M{} {}V{}M{} {}V{}\"/>\n", px(wa),
                         px(y + bh / 2), px(wb), px(wa), px(y + 3), px(y + bh - 3), px(wb),
                         px(y + 3), px(y + bh - 3));
        label_x = std::max(label_x, wb + 6);
      }
      if (b.marker && std::isfinite(*b.marker)) {
        const double xm = xs(*b.marker);
        s += fmt::format("<path class=\"marker\" d=\"M{} {}V{}\"/>\n", px(xm), px(y - 2),
                         px(y + bh + 2));
        label_x = std::max(label_x, xm + 6);
      }
      s += fmt::format("<text x=\"{}\" y=\"{}\" class=\"value\">{}", px(label_x), px(cy),
                       html_escape(b.value_text));
      if (!b.note.empty()) {
        s += fmt::format("<tspan class=\"{}\" dx=\"6\">{}</tspan>",
                         b.note_is_status ? "status" : "speedup", html_escape(shorten(b.note, 24)));
      }
      s += "</text>\n";
    } else {
      // A failure in the failure style; a value that is simply absent (no seeds) in grey.
      s += text(x0 + 6, cy, shorten(b.note, 48), b.note_is_status ? "status" : "absent");
    }
    s += "</g>\n";
  }
  return s + "</svg>\n";
}

std::string legend_html(const std::vector<std::pair<std::string, std::string>>& items,
                        const std::vector<std::string>& dashes) {
  std::string s = "<div class=\"legend\">";
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string dash = i < dashes.size() ? dashes[i] : "";
    if (dash.empty()) {
      s += fmt::format(
          "<span class=\"key\"><i class=\"swatch\" style=\"background:{}\"></i>{}</span>",
          items[i].second, html_escape(items[i].first));
    } else {
      s += fmt::format(
          "<span class=\"key\"><svg class=\"swatch-line\" width=\"26\" height=\"10\"><line "
          "x1=\"1\" "
          "y1=\"5\" x2=\"25\" y2=\"5\" stroke=\"{}\" stroke-width=\"2.5\" "
          "stroke-dasharray=\"{}\"/></svg>{}</span>",
          items[i].second, dash, html_escape(items[i].first));
    }
  }
  return s + "</div>\n";
}

// Line chart over steps. `log_base` 0: linear y; 10 or 2: logarithmic y with ticks at powers.
std::string line_chart(const std::string& kind, const std::vector<Line>& lines,
                       const std::string& x_label, const std::string& y_label, int log_base,
                       const std::vector<double>& x_markers, double H,
                       const std::vector<std::pair<double, std::string>>& x_ticks) {
  const double W = 1120, L = 70, R = 20, T = 14, B = 46;
  const double pw = W - L - R, ph = H - T - B;
  double xmin = INFINITY, xmax = -INFINITY, ymin = INFINITY, ymax = -INFINITY;
  auto fy = [&](double y) { return log_base ? std::log(y) / std::log(double(log_base)) : y; };
  for (const Line& l : lines) {
    for (auto [x, y] : l.pts) {
      if (!std::isfinite(y) || (log_base && !(y > 0))) continue;
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
      ymin = std::min(ymin, fy(y));
      ymax = std::max(ymax, fy(y));
    }
  }
  std::string s = svg_open(kind, W, H, y_label + " over " + x_label);
  if (!std::isfinite(xmin)) {
    s += text(W / 2, H / 2, "no finite values to plot", "status", "middle");
    return s + "</svg>\n";
  }
  if (x_ticks.empty()) {
    xmin = std::min(xmin, 0.0);  // steps count from 0; bucket centres start a little later
  } else {
    for (const auto& [x, label] : x_ticks) {
      xmin = std::min(xmin, x);
      xmax = std::max(xmax, x);
    }
  }
  if (!(xmax > xmin)) xmax = xmin + 1;
  std::vector<std::pair<double, std::string>> yticks;  // (transformed value, text)
  if (log_base) {
    // Whole powers; a flat series still gets one power above and below.
    double lo = std::floor(ymin), hi = std::ceil(ymax);
    if (hi - lo < 1) {
      lo -= 1;
      hi += 1;
    }
    const double step = std::max(1.0, std::ceil((hi - lo) / 8));
    ymin = lo;
    ymax = hi;
    for (double e = lo; e <= hi + 1e-9; e += step) {
      const double v = std::pow(double(log_base), e);
      yticks.emplace_back(e, log_base == 2 ? power_of_two(e) : format_general(v));
    }
  } else {
    double lo = std::min(0.0, ymin), hi = ymax;
    if (!(hi > lo)) hi = lo + 1;
    for (double t : nice_ticks(lo, hi, 5)) yticks.emplace_back(t, format_general(t));
    ymin = lo;
    ymax = std::max(hi, yticks.back().first);
  }
  auto X = [&](double x) { return L + pw * (x - xmin) / (xmax - xmin); };
  auto Y = [&](double v) { return T + ph * (1 - (v - ymin) / (ymax - ymin)); };

  for (const auto& [v, label] : yticks) {
    s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", px(L),
                     px(L + pw), px(Y(v)), px(Y(v)));
    s += text(L - 6, Y(v) + 4, label, "tick", "end");
  }
  if (x_ticks.empty()) {
    for (double t : nice_ticks(xmin, xmax, 8)) {
      if (t < xmin - 1e-9 || t > xmax + 1e-9) continue;
      s += text(X(t), T + ph + 16, group_thousands(t), "tick", "middle");
    }
  } else {
    for (const auto& [x, label] : x_ticks) s += text(X(x), T + ph + 16, label, "tick", "middle");
  }
  for (double m : x_markers) {
    if (m <= xmin || m >= xmax) continue;
    s += fmt::format("<line class=\"epoch\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", px(X(m)),
                     px(X(m)), px(T), px(T + ph));
  }
  s += fmt::format("<path class=\"axis\" d=\"M{} {}V{}H{}\"/>\n", px(L), px(T), px(T + ph),
                   px(L + pw));
  s += text(L + pw / 2, H - 8, x_label, "axis-label", "middle");
  s += fmt::format(
      "<text class=\"axis-label\" text-anchor=\"middle\" transform=\"translate(16 {}) "
      "rotate(-90)\">{}</text>\n",
      px(T + ph / 2), html_escape(y_label));

  for (const Line& l : lines) {
    std::string d;
    bool pen = false;
    for (auto [x, y] : l.pts) {
      if (!std::isfinite(y) || (log_base && !(y > 0))) {
        pen = false;
        continue;
      }
      d += fmt::format("{}{} {}", pen ? "L" : "M", px(X(x)), px(Y(fy(y))));
      pen = true;
    }
    if (d.empty()) continue;
    s += fmt::format("<path class=\"series\" d=\"{}\" stroke=\"{}\"{}><title>{}</title></path>\n",
                     d, l.color, l.dash.empty() ? "" : " stroke-dasharray=\"" + l.dash + "\"",
                     html_escape(l.tooltip));
    // Few points on a labelled axis (a sweep): each one marked.
    if (!x_ticks.empty())
      for (auto [x, y] : l.pts)
        if (std::isfinite(y) && (!log_base || y > 0))
          s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"/>\n", px(X(x)),
                           px(Y(fy(y))), l.color);
  }
  return s + "</svg>\n";
}

// tip(row, key, value): a part's hover text. Values are divided by `scale` for the ticks.
std::string stacked_chart(const std::string& kind, const std::string& aria,
                          const std::vector<Stack>& stacks,
                          const std::vector<std::pair<std::string, std::string>>& keys,
                          const std::string& axis_label, double scale,
                          const std::function<std::string(size_t, size_t, double)>& tip) {
  const double W = kBarW, left = kBarLeft, right = kBarRight, row = kBarRow, top = kBarTop,
               bottom = 46;
  const double pw = W - left - right;
  double max_v = 0;
  std::vector<bool> used(keys.size());
  for (const Stack& st : stacks) {
    double sum = 0;
    for (size_t k = 0; k < st.parts.size() && k < keys.size(); ++k) {
      sum += st.parts[k];
      used[k] = used[k] || st.parts[k] > 0;
    }
    max_v = std::max(max_v, sum);
  }
  const std::vector<double> ticks = nice_ticks(0, std::max(max_v / scale, 1e-9), 6);
  const double top_v = std::max(max_v, ticks.back() * scale);
  const double y_axis = top + stacks.size() * row, H = y_axis + bottom;
  auto xs = [&](double v) { return left + pw * std::clamp(v / top_v, 0.0, 1.0); };

  std::string s = svg_open(kind, W, H, aria);
  for (double t : ticks) {
    const double x = xs(t * scale);
    s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", px(x),
                     px(x), px(top - 4), px(y_axis));
    s += text(x, y_axis + 15, format_general(t), "tick", "middle");
  }
  s += fmt::format("<line class=\"axis\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", px(left),
                   px(left), px(top - 4), px(y_axis));
  s += text(left + pw / 2, H - 8, axis_label, "axis-label", "middle");
  std::vector<std::string> labels;
  for (const Stack& st : stacks) labels.push_back(st.label);
  labels = shorten_labels(labels, 30);
  for (size_t i = 0; i < stacks.size(); ++i) {
    const Stack& st = stacks[i];
    const double y = top + i * row + 4, bh = row - 8, cy = y + bh / 2 + 4;
    s += text(left - 8, cy, labels[i], "bar-label", "end");
    double acc = 0;
    for (size_t k = 0; k < st.parts.size() && k < keys.size(); ++k) {
      const double v = st.parts[k];
      if (!(v > 0)) continue;
      const double xa = xs(acc), xb = xs(acc + v);
      acc += v;
      s += fmt::format(
          "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" "
          "fill=\"{}\"><title>{}</title></rect>\n",
          px(xa), px(y), px(std::max(0.5, xb - xa)), px(bh), keys[k].second,
          html_escape(tip(i, k, v)));
    }
    s += text(xs(acc) + 6, cy, st.total, st.bad ? "status" : "value");
  }
  s += "</svg>\n";

  std::vector<std::pair<std::string, std::string>> items;
  for (size_t k = 0; k < keys.size(); ++k)
    if (used[k]) items.push_back(keys[k]);
  return legend_html(items) + s;
}

// A trend over commits (`report --history`): one series, its spread as whiskers and a faint
// band, gaps where a commit has no value, and every point's numbers in data- attributes.
std::string trend_chart(const std::string& kind, const std::string& aria,
                        const std::vector<TrendPoint>& pts,
                        const std::vector<std::pair<std::string, std::string>>& x_labels,
                        const std::string& color, const Axis& axis, double H) {
  const double W = kBarW, L = 64, R = 18, T = 14, B = 62, pad = 18;
  const double pw = W - L - R, ph = H - T - B;
  const size_t n = pts.size();
  auto finite = [](double v) { return std::isfinite(v); };
  auto has_spread = [&](const TrendPoint& p) {
    return finite(p.value) && finite(p.lo) && finite(p.hi) && p.hi >= p.lo;
  };
  double max_v = 0;
  bool any = false;
  for (const TrendPoint& p : pts) {
    if (!finite(p.value)) continue;
    any = true;
    max_v = std::max(max_v, p.value);
    if (has_spread(p)) max_v = std::max(max_v, p.hi);
  }
  if (!(max_v > 0)) max_v = axis.scale;
  const std::vector<double> ticks = nice_ticks(0, max_v / axis.scale, 4);
  const double top_v = std::max(max_v, ticks.back() * axis.scale);
  auto X = [&](size_t i) {
    return n < 2 ? L + pw / 2 : L + pad + (pw - 2 * pad) * double(i) / double(n - 1);
  };
  auto Y = [&](double v) { return T + ph * (1 - std::clamp(v / top_v, 0.0, 1.0)); };
  // Data values exactly (the shortest text that reads back as the same double).
  auto exact = [](double v) { return fmt::format("{}", v); };

  std::string s = svg_open(kind, W, H, aria);
  for (double t : ticks) {
    const double y = Y(t * axis.scale);
    s += fmt::format("<line class=\"grid\" x1=\"{}\" x2=\"{}\" y1=\"{}\" y2=\"{}\"/>\n", px(L),
                     px(L + pw), px(y), px(y));
    s += text(L - 6, y + 4, axis.tick_text(t), "tick", "end");
  }
  // Commit labels, thinned so that they do not overlap; the newest is always labelled.
  const double spacing = n < 2 ? pw : (pw - 2 * pad) / double(n - 1);
  const size_t every = std::max<size_t>(1, static_cast<size_t>(std::ceil(54 / spacing)));
  for (size_t i = 0; i < n; ++i) {
    s += fmt::format("<path class=\"axis\" d=\"M{} {}v4\"/>\n", px(X(i)), px(T + ph));
    if ((n - 1 - i) % every != 0 || i >= x_labels.size()) continue;
    s += text(X(i), T + ph + 16, shorten(x_labels[i].first, 12), "tick commit", "middle");
    s += text(X(i), T + ph + 29, x_labels[i].second, "tick date", "middle");
  }
  s += fmt::format("<path class=\"axis\" d=\"M{} {}V{}H{}\"/>\n", px(L), px(T), px(T + ph),
                   px(L + pw));
  s += text(L + pw / 2, H - 8, "commit, oldest to newest", "axis-label", "middle");
  s += fmt::format(
      "<text class=\"axis-label\" text-anchor=\"middle\" transform=\"translate(16 {}) "
      "rotate(-90)\">{}</text>\n",
      px(T + ph / 2), html_escape(axis.label));
  if (!any) s += text(L + pw / 2, T + ph / 2, "no finite values to plot", "status", "middle");

  // The band: one polygon per run of neighbouring points that all have a spread.
  for (size_t i = 0; i < n;) {
    if (!has_spread(pts[i])) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < n && has_spread(pts[j + 1])) ++j;
    if (j > i) {
      std::string d;
      for (size_t k = i; k <= j; ++k)
        d += fmt::format("{}{} {}", k == i ? "M" : "L", px(X(k)), px(Y(pts[k].hi)));
      for (size_t k = j + 1; k-- > i;) d += fmt::format("L{} {}", px(X(k)), px(Y(pts[k].lo)));
      s += fmt::format("<path class=\"band\" d=\"{}Z\" fill=\"{}\"/>\n", d, color);
    }
    i = j + 1;
  }
  // The line, broken where a commit has no value.
  std::string d;
  bool pen = false;
  for (size_t i = 0; i < n; ++i) {
    if (!finite(pts[i].value)) {
      pen = false;
      continue;
    }
    d += fmt::format("{}{} {}", pen ? "L" : "M", px(X(i)), px(Y(pts[i].value)));
    pen = true;
  }
  if (!d.empty()) s += fmt::format("<path class=\"series\" d=\"{}\" stroke=\"{}\"/>\n", d, color);

  for (size_t i = 0; i < n; ++i) {
    const TrendPoint& p = pts[i];
    const std::string commit = i < x_labels.size() ? html_escape(x_labels[i].first) : "";
    if (finite(p.value)) {
      std::string spread;
      if (has_spread(p)) {
        s += fmt::format("<path class=\"whisker\" d=\"M{} {}V{}M{} {}h6M{} {}h6\"/>\n", px(X(i)),
                         px(Y(p.lo)), px(Y(p.hi)), px(X(i) - 3), px(Y(p.lo)), px(X(i) - 3),
                         px(Y(p.hi)));
        spread = fmt::format(" data-lo=\"{}\" data-hi=\"{}\"", exact(p.lo), exact(p.hi));
      }
      s += fmt::format(
          "<circle class=\"trend-point\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{}\"{} data-x=\"{}\" "
          "data-commit=\"{}\" data-value=\"{}\"{}{}><title>{}</title></circle>\n",
          px(X(i)), px(Y(p.value)), p.busy ? "#fff" : color,
          p.busy ? fmt::format(" stroke=\"{}\" stroke-width=\"1.5\"", color) : "", i, commit,
          exact(p.value), spread, p.busy ? " data-busy=\"true\"" : "", html_escape(p.tooltip));
    } else if (!p.status.empty()) {
      // A cross on the x axis: this commit has a result, but not a number.
      const double x = X(i), y = T + ph - 7;
      s += fmt::format(
          "<g class=\"trend-status\" data-x=\"{}\" data-commit=\"{}\" data-status=\"{}\">"
          "<title>{}</title><path class=\"cross\" d=\"M{} {}l8 8m0 -8l-8 8\"/>\n",
          i, commit, html_escape(p.status), html_escape(p.tooltip), px(x - 4), px(y - 4));
      s += text(x, y - 9, shorten(p.status, 12), "status", "middle");
      s += "</g>\n";
    }
  }
  return s + "</svg>\n";
}

}  // namespace svg
}  // namespace mpbench
