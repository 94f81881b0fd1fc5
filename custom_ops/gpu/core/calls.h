// What the C ABI's translation units share (capi.cc defines these, queue.cc
// uses them too): the argument checks, the per-thread last error, and the
// decode + warp of one batch into device memory.

#ifndef BZNA_TF_GPU_CORE_CALLS_H_
#define BZNA_TF_GPU_CORE_CALLS_H_

#include <cstdint>

#include "gpu/core/bzna_gpu.h"
#include "gpu/core/driver.h"
#include "gpu/core/status.h"

namespace bzna_tf {
namespace gpu {

// The status code of `s`, its message kept for bzna_gpu_last_error() on this
// thread ("" when OK).
int Finish(const Status& s);

// Argument checks of bzna_gpu_decode_warp (no GPU needed).
Status CheckParams(const bzna_gpu_warp_params* p);
Status CheckMatrices(const float* matrices, int64_t matrix_count, int64_t count);
// `allow_empty`: a picture of 0 bytes is one that was not read (a queue's
// SKIP_BAD batch: it becomes that sample's failure), not an argument error.
Status CheckPictures(const uint8_t* const* pictures, const uint64_t* sizes, int64_t count, bool allow_empty = false);
Status CheckPictureSizes(const int32_t* picture_sizes, int64_t count);

// Floats of `count` output samples.
int64_t OutputElements(const bzna_gpu_warp_params& p, int64_t count);

// What a call works with once the driver, context and kernels are ready.
struct Gpu {
  const Driver* d = nullptr;
  CUcontext context = nullptr;
  Kernels kernels;
};

// bzna_gpu_decode_warp's work, in g.context (current): starts after the work
// queued on `stream`, returns when the output is written. matrices and out
// are device memory, picture_sizes host memory (or null).
Status DecodeWarp(const Gpu& g, CUstream stream, const uint8_t* const* pictures, const uint64_t* sizes,
                  int64_t count, const float* matrices, int64_t matrix_count, const int32_t* picture_sizes,
                  const bzna_gpu_warp_params& p, float* out);

// bzna_gpu_fill_oob's work: p.oob in every pixel of `count` output samples,
// after the work queued on `stream`; returns when written.
Status FillOob(const Gpu& g, CUstream stream, int64_t count, const bzna_gpu_warp_params& p, float* out);

}  // namespace gpu
}  // namespace bzna_tf

#endif  // BZNA_TF_GPU_CORE_CALLS_H_
