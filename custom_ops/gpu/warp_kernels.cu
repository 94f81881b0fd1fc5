// CUDA kernels of the fused warp: one thread per output pixel, the per-pixel
// math from lib/warp.h (the same code the CPU kernels run). Compiled by nvcc
// with --fmad=false (so the float32 arithmetic is the CPU kernels' order)
// into a fatbin that the host code loads with the CUDA driver API at run time:
// nothing here is linked against libcudart or libcuda.

#include "gpu/launch_params.h"
#include "lib/warp.h"

using bzna_tf::gpu::RgbLaunch;
using bzna_tf::gpu::YuvLaunch;
namespace warp = bzna_tf::warp;

extern "C" __global__ void bzna_warp_yuv(const YuvLaunch p) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t y = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (x >= p.layout.width || y >= p.layout.height) return;
  const int64_t s = blockIdx.z;
  warp::Plane<uint8_t> luma = p.luma, cb = p.cb, cr = p.cr;
  luma.data += s * p.luma_sample_stride;
  cb.data += s * p.chroma_sample_stride;
  cr.data += s * p.chroma_sample_stride;
  const int64_t n = p.first_sample + s;
  const float* m = p.matrices + (p.broadcast_matrix ? 0 : n * 9);
  warp::WarpYuv420Pixel(luma, cb, cr, m, p.color, p.layout, n, y, x, p.out);
}

template <typename T>
__device__ void WarpRgb(const RgbLaunch<T>& p) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t y = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (x >= p.layout.width || y >= p.layout.height) return;
  const int64_t n = p.first_sample + blockIdx.z;
  const int64_t row = static_cast<int64_t>(p.width) * 3;
  const T* image = p.images + n * row * p.height;
  warp::Plane<T> channels[3];
  for (int c = 0; c < 3; ++c) {
    channels[c] = {image + c, p.width, p.height, row, 3};
  }
  const float* m = p.matrices + (p.broadcast_matrix ? 0 : n * 9);
  warp::WarpRgbPixel(channels, m, p.color, p.layout, n, y, x, p.out);
}

extern "C" __global__ void bzna_warp_rgb_u8(const RgbLaunch<uint8_t> p) { WarpRgb(p); }
extern "C" __global__ void bzna_warp_rgb_f32(const RgbLaunch<float> p) { WarpRgb(p); }
