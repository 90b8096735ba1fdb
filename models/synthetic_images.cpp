// The synthetic image task; synthetic_images.h describes it.
#include "models/synthetic_images.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <set>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "kernels/error.h"
#include "models/rng.h"

namespace mpbench {

namespace {

// Streams of one seed: the motifs, then one per sample of each split.
constexpr uint64_t kMotifStream = 0;
constexpr uint64_t kTrainBase = uint64_t{1} << 40;
constexpr uint64_t kEvalBase = uint64_t{2} << 40;

int motif_side(const ResnetSpec& r, const SyntheticImageTask& task) {
  return static_cast<int>(std::min<int64_t>(task.motif_size, r.image_size));
}

// Motif copies per side: one per cell_size x cell_size cell (at least one).
int64_t image_cells(const ResnetSpec& r, int cell_size) {
  return std::max<int64_t>(1, r.image_size / cell_size);
}

// Four 16-bit uniforms summed (Irwin-Hall, variance 4/12), centred and scaled to unit variance.
inline float fast_noise(Rng& rng) {
  const uint64_t v = rng.next();
  const uint32_t s = static_cast<uint32_t>(v & 0xffff) + static_cast<uint32_t>((v >> 16) & 0xffff) +
                     static_cast<uint32_t>((v >> 32) & 0xffff) + static_cast<uint32_t>(v >> 48);
  // (s + 2) / 65536 is the sum of four uniforms on (0, 1) at bin centres; mean 2, variance 1/3.
  constexpr double kScale = 1.7320508075688772 / 65536.0;  // sqrt(3) / 2^16
  return static_cast<float>((static_cast<double>(s) + 2.0 - 131072.0) * kScale);
}

// done / total: the samples made before this split, and in all (for progress).
void fill_split(const ResnetSpec& r, const std::vector<float>& motifs, int m, double amplitude,
                int cell_size, uint64_t seed, uint64_t stream_base, int64_t n,
                std::vector<float>& x, std::vector<int32_t>& y, const DataProgress& progress,
                int64_t done, int64_t total) {
  const int64_t s = r.image_size, c = r.in_channels, dim = s * s * c;
  const int classes = static_cast<int>(r.num_classes);
  const int64_t cells = image_cells(r, cell_size), extent = s / cells;
  const float amp = static_cast<float>(amplitude);
  x.resize(static_cast<size_t>(n * dim));
  y.resize(static_cast<size_t>(n));
  std::atomic<int64_t> made{0};
  // Only the calling thread reports; the others count.
  const std::thread::id caller = std::this_thread::get_id();
  auto work = [&](int64_t begin, int64_t end) {
    const bool reports = progress && std::this_thread::get_id() == caller;
    for (int64_t i = begin; i < end; ++i) {
      if (reports) progress(done + made.load(std::memory_order_relaxed), total);
      Rng rng(seed, stream_base + static_cast<uint64_t>(i));
      const uint32_t cls = rng.below(static_cast<uint32_t>(classes));
      float* img = x.data() + i * dim;
      for (int64_t k = 0; k < dim; ++k) img[k] = fast_noise(rng);
      const float* motif = motifs.data() + static_cast<int64_t>(cls) * m * m * c;
      // One copy per cell, at a random offset inside it; the last cell of a row or column
      // takes the remainder of the image.
      for (int64_t cy = 0; cy < cells; ++cy) {
        for (int64_t cx = 0; cx < cells; ++cx) {
          const int64_t ey = cy + 1 < cells ? extent : s - cy * extent;
          const int64_t ex = cx + 1 < cells ? extent : s - cx * extent;
          const int64_t top = cy * extent + rng.below(static_cast<uint32_t>(ey - m + 1));
          const int64_t left = cx * extent + rng.below(static_cast<uint32_t>(ex - m + 1));
          for (int64_t u = 0; u < m; ++u) {
            for (int64_t v = 0; v < m; ++v) {
              float* pixel = img + ((top + u) * s + left + v) * c;
              const float* mp = motif + (u * m + v) * c;
              for (int64_t ch = 0; ch < c; ++ch) pixel[ch] += amp * mp[ch];
            }
          }
        }
      }
      y[static_cast<size_t>(i)] = static_cast<int32_t>(cls);
      made.fetch_add(1, std::memory_order_relaxed);
    }
  };
  const int64_t threads = std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 64);
  const int64_t per = (n + threads - 1) / threads;
  if (threads == 1 || n * dim < (int64_t{1} << 20)) {
    work(0, n);
    return;
  }
  // Joined however this function ends: a thread left joinable would end the process.
  struct Pool {
    std::vector<std::thread> threads;
    ~Pool() {
      for (auto& th : threads) th.join();
    }
  } pool;
  // The first share on this thread, which reports, and any share no thread could be started for
  // (a limit on threads: std::system_error).
  std::vector<std::pair<int64_t, int64_t>> here = {{0, std::min(n, per)}};
  for (int64_t t = 1; t < threads; ++t) {
    const int64_t b = t * per, e = std::min(n, b + per);
    if (b >= e) continue;
    try {
      pool.threads.emplace_back(work, b, e);
    } catch (const std::system_error&) {
      here.emplace_back(b, e);
    }
  }
  for (const auto& [b, e] : here) work(b, e);
}

}  // namespace

std::vector<float> synthetic_image_motifs(const ResnetSpec& r, uint64_t seed,
                                          const SyntheticImageTask& task) {
  MPB_CHECK(r.image_size > 0 && r.in_channels > 0 && r.num_classes >= 2,
            "synthetic images {}x{}x{} classes {}", r.image_size, r.image_size, r.in_channels,
            r.num_classes);
  MPB_CHECK(task.motif_size >= 2 && task.amplitude > 0 && task.cell_size >= task.motif_size,
            "synthetic image task: motif {} amplitude {} cell {}", task.motif_size, task.amplitude,
            task.cell_size);
  const int m = motif_side(r, task);
  const int64_t c = r.in_channels, pixels = static_cast<int64_t>(m) * m;
  Rng rng(seed, kMotifStream);
  // The shared pixel vectors, centred and scaled per channel over the m*m pixels.
  std::vector<double> base(static_cast<size_t>(pixels * c));
  for (double& v : base) v = rng.normal();
  for (int64_t ch = 0; ch < c; ++ch) {
    double mean = 0, sq = 0;
    for (int64_t p = 0; p < pixels; ++p) mean += base[p * c + ch];
    mean /= static_cast<double>(pixels);
    for (int64_t p = 0; p < pixels; ++p) {
      base[p * c + ch] -= mean;
      sq += base[p * c + ch] * base[p * c + ch];
    }
    const double scale = sq > 0 ? 1.0 / std::sqrt(sq / static_cast<double>(pixels)) : 0.0;
    for (int64_t p = 0; p < pixels; ++p) base[p * c + ch] *= scale;
  }
  // One arrangement per class (Fisher-Yates); two equal ones are redrawn. There must be enough
  // arrangements (the spec's validation checks), else this would never end; `seen` keeps the
  // check for a repeat logarithmic, for up to a million classes.
  MPB_CHECK(r.num_classes <= synthetic_image_max_classes(r, task),
            "synthetic images: {} classes, but {}x{} images have only {} motif arrangements",
            r.num_classes, r.image_size, r.image_size, synthetic_image_max_classes(r, task));
  std::vector<std::vector<int>> perms;
  std::set<std::vector<int>> seen;
  while (static_cast<int64_t>(perms.size()) < r.num_classes) {
    std::vector<int> p(static_cast<size_t>(pixels));
    for (int j = 0; j < pixels; ++j) p[j] = j;
    for (int j = static_cast<int>(pixels) - 1; j > 0; --j)
      std::swap(p[j], p[rng.below(static_cast<uint32_t>(j + 1))]);
    if (seen.insert(p).second) perms.push_back(std::move(p));
  }
  std::vector<float> motifs(static_cast<size_t>(r.num_classes * pixels * c));
  for (int64_t k = 0; k < r.num_classes; ++k)
    for (int64_t j = 0; j < pixels; ++j)
      for (int64_t ch = 0; ch < c; ++ch)
        motifs[(k * pixels + j) * c + ch] = static_cast<float>(base[perms[k][j] * c + ch]);
  return motifs;
}

int64_t synthetic_image_max_classes(const ResnetSpec& r, const SyntheticImageTask& task) {
  const int64_t pixels = static_cast<int64_t>(motif_side(r, task)) * motif_side(r, task);
  int64_t f = 1;
  for (int64_t k = 2; k <= pixels; ++k) {
    if (f > std::numeric_limits<int64_t>::max() / k) return std::numeric_limits<int64_t>::max();
    f *= k;
  }
  return f;
}

Dataset make_synthetic_images(const ResnetSpec& r, int64_t n_train, int64_t n_eval, uint64_t seed,
                              const SyntheticImageTask& task, const DataProgress& progress) {
  MPB_CHECK(n_train > 0 && n_eval > 0, "synthetic images: n {} {}", n_train, n_eval);
  const std::vector<float> motifs = synthetic_image_motifs(r, seed, task);
  const int m = motif_side(r, task);
  Dataset ds;
  ds.sample_dim = r.image_size * r.image_size * r.in_channels;
  ds.num_classes = static_cast<int>(r.num_classes);
  ds.input_dtype = DType::F32;
  ds.labels_per_sample = 1;
  const int64_t total = n_train + n_eval;
  fill_split(r, motifs, m, task.amplitude, task.cell_size, seed, kTrainBase, n_train, ds.train_x,
             ds.train_y, progress, 0, total);
  fill_split(r, motifs, m, task.amplitude, task.cell_size, seed, kEvalBase, n_eval, ds.eval_x,
             ds.eval_y, progress, n_train, total);
  if (progress) progress(total, total);
  ds.description = fmt::format(
      "synthetic images: {}x{}x{}, {} classes told apart only by the arrangement of one shared "
      "set of {}x{} motif pixels (amplitude {}) at random positions in unit noise, seed {}, {} "
      "train / {} eval",
      r.image_size, r.image_size, r.in_channels, r.num_classes, m, m, task.amplitude, seed, n_train,
      n_eval);
  return ds;
}

}  // namespace mpbench
