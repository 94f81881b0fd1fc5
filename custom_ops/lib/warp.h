// Per-pixel math of the fused warp ops (SPEC.md section 4): the one copy,
// compiled by g++ for the CPU kernels and by nvcc for the CUDA ones.
//
// For output pixel (x, y), integer indices with pixel centres on integers
// (step numbers are SPEC.md's):
//   1. (X', Y', W') = M (x, y, 1), X = X'/W', Y = Y'/W', M mapping OUTPUT
//      pixel indices to SOURCE pixel indices.
//   2. NaN, X < 0, X > coded_w - 1, Y < 0 or Y > coded_h - 1: the raw
//      out-of-bounds colour, no bias or norm.
//   3-4. Clamped bilinear sampling: luma at (X, Y), centred chroma at
//      (X/2 - 0.25, Y/2 - 0.25).
//   5. Full-range BT.601 YCbCr -> RGB, rounded half away from zero, clamped
//      to [0, 255].
//   6. out[c] = (rgb[c] - bias[c]) * norm[c].
//
// Everything is float32 in a fixed operation order so that a NumPy reference
// can agree exactly. That needs the compiler not to fuse multiply-adds
// (g++ -ffp-contract=off; nvcc --fmad=false).
//
// Device-safe: no TensorFlow, no std:: containers, no exceptions.

#ifndef BZNA_TF_LIB_WARP_H_
#define BZNA_TF_LIB_WARP_H_

#include <math.h>
#include <stdint.h>

#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
#include <emmintrin.h>
#endif

// Always inlined: called once per output pixel, a call per pixel (with its
// dozen arguments) costs about as much as the math.
#ifdef __CUDACC__
#define BZNA_HOST_DEVICE __host__ __device__ __forceinline__
#elif defined(__GNUC__)
#define BZNA_HOST_DEVICE inline __attribute__((always_inline))
#else
#define BZNA_HOST_DEVICE inline
#endif

namespace bzna_tf {
namespace warp {

// Attribute names shared by the op registrations and the kernels.
constexpr char kDataFormatAttr[] = "data_format";
constexpr char kTypeAttr[] = "T";
// The data_format value for channels-first output; the other is "NHWC".
constexpr char kChannelsFirst[] = "NCHW";

// The BT.601 full-range (JFIF) coefficients of step 5.
constexpr float kCrToR = 1.402f;
constexpr float kCbToG = 0.344136f;
constexpr float kCrToG = 0.714136f;
constexpr float kCbToB = 1.772f;
constexpr float kChromaOffset = 128.0f;

// One sampled channel: `data[y * row_stride + x * col_stride]` is texel
// (x, y), 0 <= x < width, 0 <= y < height. Planar data has col_stride 1;
// channel c of interleaved RGB starts at data + c with col_stride 3.
template <typename T>
struct Plane {
  const T* data;
  int width;
  int height;
  int64_t row_stride;
  int64_t col_stride;
};

// Per-channel constants of step 6 plus the out-of-bounds colour of step 2.
struct ColorTransform {
  float bias[3];
  float norm[3];
  float oob[3];
};

// Where output pixel (n, y, x), channel c, goes in a [N, H, W, 3] (or, with
// channels_first, [N, 3, H, W]) float32 buffer.
struct OutputLayout {
  int64_t height;
  int64_t width;
  bool channels_first;
};

struct SourcePoint {
  float x;
  float y;
};

BZNA_HOST_DEVICE int64_t OutputIndex(const OutputLayout& layout, int64_t n,
                                     int64_t y, int64_t x, int c) {
  if (layout.channels_first) {
    return ((n * 3 + c) * layout.height + y) * layout.width + x;
  }
  return ((n * layout.height + y) * layout.width + x) * 3 + c;
}

// Step 1. `m` is the 3x3 matrix, row-major.
BZNA_HOST_DEVICE SourcePoint ApplyMatrix(const float* m, float x, float y) {
  const float xp = (m[0] * x + m[1] * y) + m[2];
  const float yp = (m[3] * x + m[4] * y) + m[5];
  const float wp = (m[6] * x + m[7] * y) + m[8];
  SourcePoint p;
  p.x = xp / wp;
  p.y = yp / wp;
  return p;
}

// Step 2, written as "not inside" so that NaN (every comparison false) is
// out of bounds too; W' = 0 gives an infinity or a NaN, also out.
BZNA_HOST_DEVICE bool OutOfBounds(SourcePoint p, int coded_width,
                                  int coded_height) {
  const bool inside =
      p.x >= 0.0f && p.x <= static_cast<float>(coded_width - 1) &&
      p.y >= 0.0f && p.y <= static_cast<float>(coded_height - 1);
  return !inside;
}

BZNA_HOST_DEVICE int ClampIndex(int i, int size) {
  return i < 0 ? 0 : (i >= size ? size - 1 : i);
}

// floor(v) as an int. Callers pass coordinates within a few texels of a
// plane (true after OutOfBounds), so the conversion cannot overflow; cheaper
// than floorf on CPUs without SSE4.1 rounding, and the same value.
BZNA_HOST_DEVICE int FloorToInt(float v) {
  const int i = static_cast<int>(v);  // truncates toward zero
  return static_cast<float>(i) > v ? i - 1 : i;
}

// Where a bilinear sample at (x, y) reads and how it weighs the texels; the
// same for every plane of one size, so the two chroma planes share it.
struct BilinearTaps {
  int64_t x0, x1;  // column offsets (already times col_stride)
  int64_t y0, y1;  // row offsets (already times row_stride)
  float a, b;      // weights of x1 and y1
};

template <typename T>
BZNA_HOST_DEVICE BilinearTaps Taps(const Plane<T>& plane, float x, float y) {
  const int x0 = FloorToInt(x);
  const int y0 = FloorToInt(y);
  BilinearTaps t;
  t.a = x - static_cast<float>(x0);  // exact: x0 == floorf(x) < 2^24
  t.b = y - static_cast<float>(y0);
  t.x0 = ClampIndex(x0, plane.width) * plane.col_stride;
  t.x1 = ClampIndex(x0 + 1, plane.width) * plane.col_stride;
  t.y0 = ClampIndex(y0, plane.height) * plane.row_stride;
  t.y1 = ClampIndex(y0 + 1, plane.height) * plane.row_stride;
  return t;
}

// Bilinear sample with fetches clamped to the plane: (1 - a) v0 + a v1 along
// x on both rows, then the same along y, in float32.
template <typename T>
BZNA_HOST_DEVICE float Sample(const T* data, const BilinearTaps& t) {
  const float top = (1.0f - t.a) * static_cast<float>(data[t.y0 + t.x0]) +
                    t.a * static_cast<float>(data[t.y0 + t.x1]);
  const float bottom = (1.0f - t.a) * static_cast<float>(data[t.y1 + t.x0]) +
                       t.a * static_cast<float>(data[t.y1 + t.x1]);
  return (1.0f - t.b) * top + t.b * bottom;
}

template <typename T>
BZNA_HOST_DEVICE float SampleBilinear(const Plane<T>& plane, float x, float y) {
  return Sample(plane.data, Taps(plane, x, y));
}

// Round half away from zero, then clamp to [0, 255]. Rounding is monotonic
// and 0 and 255 are integers, so clamping first gives the same result and
// leaves a non-negative value whose truncation is its floor. v - t is exact,
// so 0.49999997f does not round up the way floorf(v + 0.5f) would.
//
// Branch-free on purpose: with real pictures the round-up test is a coin toss
// per channel, and compilers turn the portable form into jumps that
// mispredict (it doubled the warp's cost). On x86 the same operations are
// written with SSE2 intrinsics (max, min, truncate, compare-mask), which give
// the identical float32 results.
BZNA_HOST_DEVICE float RoundAndClamp(float v) {
#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
  __m128 x = _mm_max_ss(_mm_set_ss(v), _mm_setzero_ps());  // NaN -> 0
  x = _mm_min_ss(x, _mm_set_ss(255.0f));
  const __m128 t = _mm_cvtepi32_ps(_mm_cvttps_epi32(x));
  const __m128 up = _mm_and_ps(_mm_cmpge_ss(_mm_sub_ss(x, t), _mm_set_ss(0.5f)), _mm_set_ss(1.0f));
  return _mm_cvtss_f32(_mm_add_ss(t, up));
#else
  v = v > 0.0f ? v : 0.0f;
  v = v < 255.0f ? v : 255.0f;
  const float t = static_cast<float>(static_cast<int>(v));
  return t + (v - t >= 0.5f ? 1.0f : 0.0f);
#endif
}

// The RGB op's treatment of an interpolated value: uint8 sources are
// quantised like the YUV path, float sources are left as interpolated.
BZNA_HOST_DEVICE float FinishSample(float v, uint8_t /*source_tag*/) {
  return RoundAndClamp(v);
}
BZNA_HOST_DEVICE float FinishSample(float v, float /*source_tag*/) { return v; }

BZNA_HOST_DEVICE void WriteOob(const ColorTransform& color,
                               const OutputLayout& layout, int64_t n, int64_t y,
                               int64_t x, float* out) {
  for (int c = 0; c < 3; ++c) {
    out[OutputIndex(layout, n, y, x, c)] = color.oob[c];
  }
}

BZNA_HOST_DEVICE void WriteNormalized(const float rgb[3],
                                      const ColorTransform& color,
                                      const OutputLayout& layout, int64_t n,
                                      int64_t y, int64_t x, float* out) {
  for (int c = 0; c < 3; ++c) {
    out[OutputIndex(layout, n, y, x, c)] =
        (rgb[c] - color.bias[c]) * color.norm[c];
  }
}

// One whole output pixel of sample n from a 4:2:0 frame. The bounds test uses
// the luma plane's (coded) size; the chroma planes are half that, rounded up.
BZNA_HOST_DEVICE void WarpYuv420Pixel(const Plane<uint8_t>& luma,
                                      const Plane<uint8_t>& cb,
                                      const Plane<uint8_t>& cr, const float* m,
                                      const ColorTransform& color,
                                      const OutputLayout& layout, int64_t n,
                                      int64_t y, int64_t x, float* out) {
  const SourcePoint p =
      ApplyMatrix(m, static_cast<float>(x), static_cast<float>(y));
  if (OutOfBounds(p, luma.width, luma.height)) {
    WriteOob(color, layout, n, y, x, out);
    return;
  }
  // Chroma is sited at the centre of each 2x2 luma block
  // (chroma_sample_loc_type 1).
  const float xc = p.x / 2.0f - 0.25f;
  const float yc = p.y / 2.0f - 0.25f;
  const float lum = SampleBilinear(luma, p.x, p.y);
  const BilinearTaps chroma = Taps(cb, xc, yc);  // Cr has Cb's size
  const float cb_c = Sample(cb.data, chroma) - kChromaOffset;
  const float cr_c = Sample(cr.data, chroma) - kChromaOffset;
  float rgb[3];
  rgb[0] = RoundAndClamp(lum + kCrToR * cr_c);
  rgb[1] = RoundAndClamp(lum - kCbToG * cb_c - kCrToG * cr_c);
  rgb[2] = RoundAndClamp(lum + kCbToB * cb_c);
  WriteNormalized(rgb, color, layout, n, y, x, out);
}

// One whole output pixel of sample n from an RGB image; `channels[c]` samples
// channel c. T is uint8_t (result rounded and clamped) or float (not).
template <typename T>
BZNA_HOST_DEVICE void WarpRgbPixel(const Plane<T> channels[3], const float* m,
                                   const ColorTransform& color,
                                   const OutputLayout& layout, int64_t n,
                                   int64_t y, int64_t x, float* out) {
  const SourcePoint p =
      ApplyMatrix(m, static_cast<float>(x), static_cast<float>(y));
  if (OutOfBounds(p, channels[0].width, channels[0].height)) {
    WriteOob(color, layout, n, y, x, out);
    return;
  }
  float rgb[3];
  for (int c = 0; c < 3; ++c) {
    rgb[c] = FinishSample(SampleBilinear(channels[c], p.x, p.y), T());
  }
  WriteNormalized(rgb, color, layout, n, y, x, out);
}

}  // namespace warp
}  // namespace bzna_tf

#endif  // BZNA_TF_LIB_WARP_H_
