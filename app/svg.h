#pragma once
// Inline SVG for the HTML report: coordinates, text, and the three chart kinds it draws (bars
// with whiskers and markers, stacked bars, lines over steps), each returned as markup. No
// JavaScript and no external resources: the page must render offline. Nothing here knows of
// runs or results; app/html_report.cpp turns those into bars, stacks and lines.
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mpbench {

// &, <, >, " and ' as entities, for text and attribute values.
std::string html_escape(const std::string& s);

namespace svg {

using Points = std::vector<std::pair<double, double>>;

// An SVG coordinate with one decimal at most ("12.5", "3", never "-0"); non-finite as 0.
std::string px(double v);
// Axis and tick numbers: "0", "0.25", "120", "1e+05".
std::string format_general(double v);
// 2¹⁶ for e = 16: loss scales are powers of two, and 65536 reads worse than its exponent.
std::string power_of_two(double e);
// At most n bytes of s, cut at a UTF-8 boundary, with "…" when cut.
std::string shorten(const std::string& s, size_t n);
// A bar's label in at most n characters (code points), cut inside what follows its first " · "
// (a file's name, a device), so that both ends stay.
std::string shorten_label(const std::string& s, size_t n);
// shorten_label of each of a chart's labels, except that labels it would make the same keep the
// part where they differ.
std::vector<std::string> shorten_labels(const std::vector<std::string>& labels, size_t n);
// Round-number ticks from the first at or above `lo` to the first at or above `hi`, so an axis
// that ends at the last tick covers every value.
std::vector<double> nice_ticks(double lo, double hi, int target);

std::string svg_open(const std::string& kind, double w, double h, const std::string& label);
std::string text(double x, double y, const std::string& s, const std::string& cls,
                 const char* anchor = "start");

struct Bar {
  std::string label, color;
  bool drawn = true;       // false: no value (the run did not finish); `note` says why
  double value = 0;        // bar length in data units
  std::string value_text;  // after the bar end
  std::string note;        // bold, after the value (speedup) or instead of the bar (status)
  bool note_is_status = false;
  std::string tooltip;
  std::optional<std::pair<double, double>> whisker;  // min..max
  std::optional<double> marker;                      // a tick across the bar (device peak)
  bool faded = false;                                // drawn, but the run did not finish
};

struct Axis {
  std::string label;
  std::function<std::string(double)> tick_text;
  double scale = 1;  // tick values are data / scale
};

// The bar charts' geometry, shared by bar_chart and stacked_chart so their rows line up.
inline constexpr double kBarW = 560, kBarLeft = 190, kBarRight = 125, kBarRow = 26, kBarTop = 14,
                        kBarBottom = 46;

std::string bar_chart(const std::string& kind, const std::vector<Bar>& bars, const Axis& axis);

// Colour keys (label, colour); a key with a dash pattern is drawn as a line.
std::string legend_html(const std::vector<std::pair<std::string, std::string>>& items,
                        const std::vector<std::string>& dashes = {});

struct Line {
  std::string label, color, dash;
  Points pts;  // NaN y: a gap
  std::string tooltip;
};

// Line chart over steps. `log_base` 0: linear y; 10 or 2: logarithmic y with ticks at powers.
// x_markers: vertical lines (epoch boundaries); H: the chart's height.
// x_ticks, when given, replace the round-number ticks of x (position, text), the x axis spans
// them instead of starting at 0, and every point is marked.
std::string line_chart(const std::string& kind, const std::vector<Line>& lines,
                       const std::string& x_label, const std::string& y_label, int log_base,
                       const std::vector<double>& x_markers, double H,
                       const std::vector<std::pair<double, std::string>>& x_ticks = {});

// One horizontal stacked bar per row on a shared axis, parts coloured by legend key.
struct Stack {
  std::string label;
  std::vector<double> parts;  // one per legend key (0: none)
  std::string total;          // written after the bar
  bool bad = false;           // the total is a run status
};

// tip(row, key, value): a part's hover text. Values are divided by `scale` for the ticks.
// The legend lists the keys that occur.
std::string stacked_chart(const std::string& kind, const std::string& aria,
                          const std::vector<Stack>& stacks,
                          const std::vector<std::pair<std::string, std::string>>& keys,
                          const std::string& axis_label, double scale,
                          const std::function<std::string(size_t, size_t, double)>& tip);

// One point per commit of a `report --history` trend. A point with a finite value is drawn as a
// circle carrying its data (data-x: its index, data-commit: its x label, data-value, data-lo,
// data-hi: the exact numbers in the caller's units) for tools and tests to read back; a NaN value
// is a gap in the line, marked on the x axis when `status` says why (a run that did not finish).
struct TrendPoint {
  double value = std::numeric_limits<double>::quiet_NaN();
  double lo = std::numeric_limits<double>::quiet_NaN();  // the spread: a whisker, and a band
  double hi = std::numeric_limits<double>::quiet_NaN();  // across neighbouring points; NaN: none
  std::string status;                                    // with a NaN value: "oom", "diverged"
  std::string tooltip;
  // Measured on a busy machine: drawn hollow, with data-busy="true".
  bool busy = false;
};

// A trend over commits: x = the points' positions, evenly spaced, labelled by (commit, date)
// (thinned from the newest back when they would overlap), y from 0 in `axis` units.
std::string trend_chart(const std::string& kind, const std::string& aria,
                        const std::vector<TrendPoint>& pts,
                        const std::vector<std::pair<std::string, std::string>>& x_labels,
                        const std::string& color, const Axis& axis, double H = 240);

}  // namespace svg
}  // namespace mpbench
