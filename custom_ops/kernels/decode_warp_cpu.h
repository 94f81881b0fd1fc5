// BznaDecodeWarp's CPU decoding (kernels/warp_kernels.cc), for the kernels
// that decode batches outside the op: BznaDecodeWarpDataset's CPU backend
// (kernels/decode_dataset_kernels.cc).

#ifndef BZNA_TF_KERNELS_DECODE_WARP_CPU_H_
#define BZNA_TF_KERNELS_DECODE_WARP_CPU_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "kernels/warp_common.h"
#include "lib/warp.h"
#include "tensorflow/core/framework/tensor.h"

namespace bzna_tf {

// Runs fn(begin, end) over [0, total) on some threads, in shards of at least
// cost_per_unit cycles per unit.
using ParallelForFn =
    std::function<void(int64_t total, int64_t cost_per_unit, const std::function<void(int64_t, int64_t)>& fn)>;

// Decodes the pictures of `data` ([N] strings) with FFmpeg and warps picture
// n into sample n of `out` (laid out as `layout`), as BznaDecodeWarp does;
// (*status)[n] is picture n's outcome (a failed picture's pixels are left as
// they were: see FillOob). With `cancelled` set, pictures not yet started
// fail with a Cancelled error.
void DecodeWarpPictures(const ParallelForFn& parallel_for, const tensorflow::Tensor& data,
                        const PictureSizes& picture_sizes, const WarpArgs& args, const warp::OutputLayout& layout,
                        float* out, std::vector<absl::Status>* status, const std::atomic<bool>* cancelled);

// Writes the raw out-of-bounds colour into every pixel of sample n.
void FillOob(const WarpArgs& args, const warp::OutputLayout& layout, int64_t n, float* out);

}  // namespace bzna_tf

#endif  // BZNA_TF_KERNELS_DECODE_WARP_CPU_H_
