// Arguments of the CUDA kernels (gpu/core/kernels.cu), shared by the host code
// that launches them (compiled by g++) and the kernels (nvcc). Plain structs
// passed by value: one kernel parameter each.

#ifndef BZNA_TF_GPU_CORE_LAUNCH_PARAMS_H_
#define BZNA_TF_GPU_CORE_LAUNCH_PARAMS_H_

#include <stdint.h>

#include "lib/warp.h"

namespace bzna_tf {
namespace gpu {

// Threads per block of every warp kernel: 32 x 8, one output pixel each.
constexpr int kBlockX = 32;
constexpr int kBlockY = 8;

// A batch of 4:2:0 frames (or one), planar or NV12. Sample s of the launch
// (blockIdx.z) reads its planes at `sample_stride * s` from the bases and
// writes output sample `first_sample + s`. NV12 is cb = uv, cr = uv + 1,
// chroma col_stride 2.
struct YuvLaunch {
  warp::Plane<uint8_t> luma;
  warp::Plane<uint8_t> cb;
  warp::Plane<uint8_t> cr;
  int64_t luma_sample_stride;
  int64_t chroma_sample_stride;
  const float* matrices;  // device, [count, 3, 3]
  int broadcast_matrix;   // 1: matrices holds one matrix for every sample
  int64_t first_sample;
  warp::ColorTransform color;
  warp::OutputLayout layout;
  int antialias;  // 1: footprint filtering where the matrix reduces
  float* out;     // device
};

// A batch of interleaved RGB images, [N, H, W, 3], uint8 (rgb_u8 kernel) or
// float32 (rgb_f32); sample s of the launch is image (and output sample)
// first_sample + s.
struct RgbLaunch {
  const void* images;  // device
  int width;
  int height;
  const float* matrices;
  int broadcast_matrix;
  int64_t first_sample;
  warp::ColorTransform color;
  warp::OutputLayout layout;
  int antialias;
  float* out;
};

// One decoded NV12 frame (width x height luma, interleaved CbCr below it,
// rows `pitch` bytes apart) copied into planar slots: luma to y
// [.., slot_height, slot_width], chroma to cb and cr [.., (slot_height + 1) / 2,
// (slot_width + 1) / 2], each at the slot's top-left corner. One thread per
// chroma texel (a 2x2 luma block).
struct Nv12Copy {
  const uint8_t* luma;
  const uint8_t* chroma;
  int64_t pitch;
  int width;
  int height;
  uint8_t* y;  // the slot's first byte
  uint8_t* cb;
  uint8_t* cr;
  int slot_width;
  int slot_chroma_width;
};

// The kernels' names in the module (extern "C", so unmangled).
constexpr char kWarpYuvKernel[] = "bzna_warp_yuv";
constexpr char kWarpRgbU8Kernel[] = "bzna_warp_rgb_u8";
constexpr char kWarpRgbF32Kernel[] = "bzna_warp_rgb_f32";
constexpr char kNv12PlanesKernel[] = "bzna_nv12_planes";

}  // namespace gpu
}  // namespace bzna_tf

#endif  // BZNA_TF_GPU_CORE_LAUNCH_PARAMS_H_
