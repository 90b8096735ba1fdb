// PLACEHOLDER (being written this session).
#include "models/synthetic_images.h"

namespace mpbench {

Dataset make_synthetic_images(const ResnetSpec&, int64_t, int64_t, uint64_t,
                              const SyntheticImageTask&) {
  throw_bad_input("synthetic image data is not implemented yet");
}

}  // namespace mpbench
