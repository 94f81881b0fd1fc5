// CUDA kernels of the GPU core: the fused warp (one thread per output pixel,
// the per-pixel math from lib/warp.h, the same code the CPU kernels run) and
// the NV12 -> planar copy of decode-only calls. Compiled ahead of time with
// --fmad=false (so the float32 arithmetic is the CPU kernels' order) into
// PTX, then cubins, that the host code loads with the CUDA driver API at run
// time: nothing here is linked against libcudart or libcuda.

#include "gpu/core/launch_params.h"
#include "lib/warp.h"

using bzna_tf::gpu::Nv12Copy;
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
  warp::WarpYuv420Pixel(luma, cb, cr, m, p.color, p.layout, n, y, x, p.out, p.antialias != 0);
}

template <typename T>
__device__ void WarpRgb(const RgbLaunch& p) {
  const int64_t x = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t y = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  if (x >= p.layout.width || y >= p.layout.height) return;
  const int64_t n = p.first_sample + blockIdx.z;
  const int64_t row = static_cast<int64_t>(p.width) * 3;
  const T* image = static_cast<const T*>(p.images) + n * row * p.height;
  warp::Plane<T> channels[3];
  for (int c = 0; c < 3; ++c) {
    channels[c] = {image + c, p.width, p.height, row, 3};
  }
  const float* m = p.matrices + (p.broadcast_matrix ? 0 : n * 9);
  warp::WarpRgbPixel(channels, m, p.color, p.layout, n, y, x, p.out, p.antialias != 0);
}

extern "C" __global__ void bzna_warp_rgb_u8(const RgbLaunch p) { WarpRgb<uint8_t>(p); }
extern "C" __global__ void bzna_warp_rgb_f32(const RgbLaunch p) { WarpRgb<float>(p); }

extern "C" __global__ void bzna_nv12_planes(const Nv12Copy p) {
  const int cx = blockIdx.x * blockDim.x + threadIdx.x;
  const int cy = blockIdx.y * blockDim.y + threadIdx.y;
  const int chroma_width = (p.width + 1) / 2, chroma_height = (p.height + 1) / 2;
  if (cx >= chroma_width || cy >= chroma_height) return;
  for (int dy = 0; dy < 2; ++dy) {
    const int y = 2 * cy + dy;
    if (y >= p.height) break;
    for (int dx = 0; dx < 2; ++dx) {
      const int x = 2 * cx + dx;
      if (x >= p.width) break;
      p.y[static_cast<int64_t>(y) * p.slot_width + x] = p.luma[y * p.pitch + x];
    }
  }
  const int64_t in = cy * p.pitch + 2 * cx;
  const int64_t out = static_cast<int64_t>(cy) * p.slot_chroma_width + cx;
  p.cb[out] = p.chroma[in];
  p.cr[out] = p.chroma[in + 1];
}
