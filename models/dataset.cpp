// Synthetic and idx datasets. See dataset.h for the synthetic task.
#include "models/dataset.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <utility>

#include <fmt/format.h>

#include "kernels/error.h"
#include "kernels/host_memory.h"
#include "models/family.h"
#include "models/input_file.h"
#include "models/rng.h"
#include "models/synthetic_images.h"
#include "models/synthetic_sequences.h"

namespace mpbench {

namespace {

// The synthetic mlp task's prototypes, num_classes x sub-clusters x input_dim floats: 1 GiB.
constexpr double kMaxPrototypeFloats = 268435456.0;  // 2^28

// Streams of one seed: prototypes, train split, eval split.
enum Stream : uint64_t { kPrototypes = 0, kTrain = 1, kEval = 2 };

// done / total: the samples made before this split, and in all (for progress).
void fill_split(const std::vector<float>& protos, int64_t dim, int num_classes, int k, double a,
                double sigma, int64_t n, Rng rng, std::vector<float>& x, std::vector<int32_t>& y,
                const DataProgress& progress, int64_t done, int64_t total) {
  x.resize(static_cast<size_t>(n * dim));
  y.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    if (progress && i % 256 == 0) progress(done + i, total);
    const uint32_t c = rng.below(static_cast<uint32_t>(num_classes));
    const uint32_t sub = rng.below(static_cast<uint32_t>(k));
    const float* p = protos.data() + (static_cast<int64_t>(c) * k + sub) * dim;
    float* row = x.data() + i * dim;
    for (int64_t d = 0; d < dim; ++d) row[d] = static_cast<float>(a * p[d] + sigma * rng.normal());
    y[static_cast<size_t>(i)] = static_cast<int32_t>(c);
  }
}

std::string read_error(const std::string& path) {
  return fmt::format("{}: cannot read: {}", path, std::strerror(errno));
}

uint32_t be32(const unsigned char* b) {
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | uint32_t{b[3]};
}

// Opens an idx file, checks the magic and returns the header's dims and the file size.
std::vector<int64_t> read_idx_header(const std::string& path, std::ifstream& in, uint32_t magic,
                                     const char* kind, int64_t& file_size) {
  check_input_file(path, "idx file", UINT64_MAX);  // a FIFO or directory, refused in one line
  in.open(path, std::ios::binary);
  if (!in) throw_bad_input(read_error(path));
  std::error_code ec;
  file_size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) throw_bad_input(fmt::format("{}: cannot read: {}", path, ec.message()));
  const int ndims = static_cast<int>(magic & 0xff);
  const int64_t header = 4 + 4 * ndims;
  unsigned char buf[16];
  if (file_size < header || !in.read(reinterpret_cast<char*>(buf), header)) {
    throw_bad_input(fmt::format("{}: not an idx {} file: {} bytes, shorter than the {}-byte header",
                                path, kind, file_size, header));
  }
  const uint32_t got = be32(buf);
  if (got != magic) {
    throw_bad_input(fmt::format("{}: not an idx {} file: magic 0x{:08x}, expected 0x{:08x}", path,
                                kind, got, magic));
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < ndims; ++i) dims.push_back(be32(buf + 4 + 4 * i));
  return dims;
}

}  // namespace

void check_synthetic_data(const Spec& spec) {
  const auto* m = std::get_if<MlpSpec>(&spec.model);
  if (!m || spec.data.type != "synthetic") return;
  const int k = SyntheticMlpTask{}.subclusters;
  const double floats = static_cast<double>(m->num_classes) * k * static_cast<double>(m->input_dim);
  if (floats > kMaxPrototypeFloats) {
    throw_bad_input(fmt::format(
        "{}: model: expected model.num_classes x {} sub-clusters x model.input_dim at most {:.0f} "
        "prototype values for data.type \"synthetic\", got {} x {} x {} = {:.3g}",
        spec.source_path, k, kMaxPrototypeFloats, m->num_classes, k, m->input_dim, floats));
  }
}

Dataset make_synthetic_mlp(int64_t input_dim, int num_classes, int64_t n_train, int64_t n_eval,
                           uint64_t seed, const SyntheticMlpTask& task,
                           const DataProgress& progress) {
  MPB_CHECK(input_dim > 0 && num_classes >= 2 && n_train > 0 && n_eval > 0,
            "synthetic dims {} classes {} n {} {}", input_dim, num_classes, n_train, n_eval);
  MPB_CHECK(task.subclusters >= 1 && task.separation > 0, "synthetic task {} {}", task.subclusters,
            task.separation);
  const double ratio = task.separation / std::sqrt(2.0 * static_cast<double>(input_dim));
  const double sigma = 1.0 / std::sqrt(1.0 + ratio * ratio);
  const double a = ratio * sigma;

  const int k = task.subclusters;
  const double proto_floats = static_cast<double>(num_classes) * k * static_cast<double>(input_dim);
  // A spec never gets here over the cap: parse_spec refuses it (check_synthetic_data).
  if (proto_floats > kMaxPrototypeFloats) {
    throw_bad_input(
        fmt::format("synthetic data: {} classes x {} sub-clusters x {} dims = {:.3g} "
                    "prototype floats, more than the 2^28 supported",
                    num_classes, k, input_dim, proto_floats));
  }
  std::vector<float> protos(static_cast<size_t>(num_classes) * k * input_dim);
  Rng proto_rng(seed, kPrototypes);
  for (float& v : protos) v = static_cast<float>(proto_rng.normal());

  Dataset ds;
  ds.sample_dim = input_dim;
  ds.num_classes = num_classes;
  const int64_t total = n_train + n_eval;
  fill_split(protos, input_dim, num_classes, k, a, sigma, n_train, Rng(seed, kTrain), ds.train_x,
             ds.train_y, progress, 0, total);
  fill_split(protos, input_dim, num_classes, k, a, sigma, n_eval, Rng(seed, kEval), ds.eval_x,
             ds.eval_y, progress, n_train, total);
  if (progress) progress(total, total);
  ds.description = fmt::format(
      "synthetic: {} classes x {} sub-clusters in {} dims, separation {} (signal {:.3f}, noise "
      "{:.3f}), seed {}, {} train / {} eval",
      num_classes, k, input_dim, task.separation, a, sigma, seed, n_train, n_eval);
  return ds;
}

IdxImages read_idx_images(const std::string& path, int64_t max_count) {
  std::ifstream in;
  int64_t size = 0;
  const std::vector<int64_t> dims = read_idx_header(path, in, 0x00000803, "image", size);
  IdxImages im;
  im.count = dims[0];
  im.rows = dims[1];
  im.cols = dims[2];
  // In double: three 32-bit dims can overflow int64, and such a header is wrong anyway.
  const double expected_d = 16.0 + static_cast<double>(im.count) * im.rows * im.cols;
  const int64_t expected = expected_d > 1e18 ? -1 : 16 + im.count * im.rows * im.cols;
  if (size != expected) {
    throw_bad_input(
        fmt::format("{}: {}: the header says {} images of {}x{} ({:.0f} bytes with the header), "
                    "the file has {} "
                    "bytes",
                    path, size < expected_d ? "truncated" : "trailing data", im.count, im.rows,
                    im.cols, expected_d, size));
  }
  const int64_t n = max_count < 0 ? im.count : std::min(max_count, im.count);
  im.pixels.resize(static_cast<size_t>(n * im.rows * im.cols));
  if (!in.read(reinterpret_cast<char*>(im.pixels.data()),
               static_cast<std::streamsize>(im.pixels.size()))) {
    throw_bad_input(read_error(path));
  }
  return im;
}

std::vector<uint8_t> read_idx_labels(const std::string& path) {
  std::ifstream in;
  int64_t size = 0;
  const std::vector<int64_t> dims = read_idx_header(path, in, 0x00000801, "label", size);
  const int64_t expected = 8 + dims[0];
  if (size != expected) {
    throw_bad_input(fmt::format(
        "{}: {}: the header says {} labels ({} bytes with the header), the file has {} bytes", path,
        size < expected ? "truncated" : "trailing data", dims[0], expected, size));
  }
  std::vector<uint8_t> labels(static_cast<size_t>(dims[0]));
  if (!in.read(reinterpret_cast<char*>(labels.data()), static_cast<std::streamsize>(dims[0]))) {
    throw_bad_input(read_error(path));
  }
  return labels;
}

namespace {

// Runs f, naming the spec key of the file whatever it refuses is about ("data.train_images: ").
template <typename F>
auto about(const std::string& key, F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::BadInput) throw;
    throw_bad_input(fmt::format("data.{}: {}", key, e.what()));
  }
}

// Everything about one split ("train", "eval") that needs no pixels: the image header and size,
// rows * cols == input_dim, the label count and range, and that the files hold n samples
// (data.<split>_samples, whose default is default_n). Returns the labels.
std::vector<uint8_t> check_idx_split(const std::string& images_path, const std::string& labels_path,
                                     int64_t n, int64_t default_n, const std::string& split,
                                     int64_t input_dim, int num_classes) {
  const std::string images_key = split + "_images", labels_key = split + "_labels";
  const IdxImages im = about(images_key, [&] { return read_idx_images(images_path, 0); });
  std::vector<uint8_t> labels = about(labels_key, [&] { return read_idx_labels(labels_path); });
  // Two 32-bit dims multiply without overflow in 64 unsigned bits (an empty file's header can
  // claim 0 images of 2^32-1 x 2^32-1).
  const uint64_t pixels = static_cast<uint64_t>(im.rows) * static_cast<uint64_t>(im.cols);
  if (pixels != static_cast<uint64_t>(input_dim)) {
    throw_bad_input(
        fmt::format("data.{}: {}: images are {}x{} = {} pixels, but model.input_dim is {}",
                    images_key, images_path, im.rows, im.cols, pixels, input_dim));
  }
  if (static_cast<int64_t>(labels.size()) != im.count) {
    throw_bad_input(fmt::format("data.{}: {}: {} labels, but {} has {} images", labels_key,
                                labels_path, labels.size(), images_path, im.count));
  }
  // A spec that leaves the count out asks for the default, a number the user never wrote.
  if (im.count < n) {
    throw_bad_input(fmt::format(
        "data.{}: {}: {} images, but data.{}_samples asks for {}{}", images_key, images_path,
        im.count, split, n, n == default_n ? " (its default, when the spec does not set it)" : ""));
  }
  // Labels past the first n are checked too: a bad label anywhere means a wrong file.
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= num_classes) {
      throw_bad_input(
          fmt::format("data.{}: {}: label {} at index {} is out of range for model.num_classes {}",
                      labels_key, labels_path, labels[i], i, num_classes));
    }
  }
  return labels;
}

void load_idx_split(const std::string& images_path, const std::string& labels_path, int64_t n,
                    int64_t default_n, const std::string& split, int64_t input_dim, int num_classes,
                    std::vector<float>& x, std::vector<int32_t>& y) {
  const std::vector<uint8_t> labels =
      check_idx_split(images_path, labels_path, n, default_n, split, input_dim, num_classes);
  const IdxImages im = about(split + "_images", [&] { return read_idx_images(images_path, n); });
  x.resize(im.pixels.size());
  for (size_t i = 0; i < im.pixels.size(); ++i) x[i] = static_cast<float>(im.pixels[i]) / 255.0f;
  y.assign(labels.begin(), labels.begin() + n);
}

}  // namespace

void check_idx(const DataSpec& data, int64_t input_dim, int num_classes) {
  const DataSpec defaults;
  check_idx_split(data.train_images, data.train_labels, data.train_samples, defaults.train_samples,
                  "train", input_dim, num_classes);
  check_idx_split(data.eval_images, data.eval_labels, data.eval_samples, defaults.eval_samples,
                  "eval", input_dim, num_classes);
}

Dataset load_idx(const DataSpec& data, int64_t input_dim, int num_classes) {
  Dataset ds;
  ds.sample_dim = input_dim;
  ds.num_classes = num_classes;
  const DataSpec defaults;
  load_idx_split(data.train_images, data.train_labels, data.train_samples, defaults.train_samples,
                 "train", input_dim, num_classes, ds.train_x, ds.train_y);
  load_idx_split(data.eval_images, data.eval_labels, data.eval_samples, defaults.eval_samples,
                 "eval", input_dim, num_classes, ds.eval_x, ds.eval_y);
  ds.description =
      fmt::format("idx: {} ({} train), {} ({} eval), pixels scaled to [0, 1]", data.train_images,
                  ds.train_size(), data.eval_images, ds.eval_size());
  return ds;
}

void check_dataset_fits(const Spec& spec, int copies) {
  const ModelIo io = model_io(spec);
  // Inputs and labels, 4 bytes each (a float or a token id).
  const double bytes = 4.0 * double(spec.data.train_samples + spec.data.eval_samples) *
                       double(io.input_dim + io.labels_per_sample);
  const double needed = bytes * copies;
  const std::string takes =
      copies == 1 ? fmt::format("the dataset takes {:.0f} bytes of host memory", bytes)
                  : fmt::format(
                        "the dataset and the training device's {} cop{} of it take "
                        "{:.0f} bytes of host memory",
                        copies - 1, copies == 2 ? "y" : "ies", needed);
  HostMemory host = host_memory_left();
  if (HostMemory as = address_space_memory(); as.bytes < host.bytes) host = std::move(as);
  if (needed > double(host.bytes))
    throw Error(
        ErrorKind::OutOfMemory,
        fmt::format("{}: data: {}, more than is left: {}", spec.source_path, takes, host.why),
        /*oom=*/true);
}

Dataset make_dataset(const Spec& spec, const DataProgress& progress) {
  const DataSpec& d = spec.data;
  if (d.type != "synthetic" && d.type != "idx")
    throw_bad_input(
        fmt::format("{}: data.type: unknown data type \"{}\"", spec.source_path, d.type));
  check_dataset_fits(spec);
  return family_of(spec.model).dataset(spec, progress);
}

void require_synthetic_data(const Spec& spec) {
  if (spec.data.type == "synthetic") return;
  throw_bad_input(fmt::format(
      "{}: data.type: \"{}\" files hold flat images for an mlp; model.type \"{}\" takes "
      "\"synthetic\" data",
      spec.source_path, spec.data.type, spec.family));
}

}  // namespace mpbench
