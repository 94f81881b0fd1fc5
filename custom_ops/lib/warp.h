// Per-pixel math of the fused warp ops (SPEC section 4): the one copy,
// compiled by g++ for the CPU kernels and by nvcc for the CUDA ones.
//
// For output pixel (x, y), integer indices with pixel centres on integers
// (step numbers are SPEC section 4's):
//   1. (X', Y', W') = M (x, y, 1), X = X'/W', Y = Y'/W', M mapping OUTPUT
//      pixel indices to SOURCE pixel indices.
//   2. NaN, X < -0.5, X > coded_w - 0.5, Y < -0.5 or Y > coded_h - 0.5:
//      the raw out-of-bounds colour, no bias or norm. The picture covers
//      half a pixel beyond its outer pixel centres, so a point in that band
//      is inside and samples the edge (3-4 clamp), as torchvision,
//      tf.image.resize and Pillow do. Benzina's kernel (and SPEC section 4)
//      test X < 0 and X > coded_w - 1 instead, which leaves a frame of the
//      fill colour around every upscaled picture: a deliberate deviation.
//   3-4. Clamped bilinear sampling: luma at (X, Y), centred chroma at
//      (X/2 - 0.25, Y/2 - 0.25).
//   5. Full-range BT.601 YCbCr -> RGB, rounded half away from zero, clamped
//      to [0, 255].
//   6. out[c] = (rgb[c] - bias[c]) * norm[c].
//
// With antialias (the ops' `antialias` attribute; off, the above exactly),
// steps 3-4 average a footprint instead of sampling a point wherever the
// matrix reduces (see "Antialiasing" below); step 2 still tests the centre
// point only.
//
// Everything is float32 in a fixed operation order so that a NumPy reference
// can agree exactly. That needs the compiler not to fuse multiply-adds
// (g++ -ffp-contract=off; nvcc --fmad=false).
//
// The CPU kernels run axis-aligned matrices (resizes, crops, flips) through
// lib/warp_rows.h, which arranges these same helpers a row at a time and
// must give the per-pixel functions' results bit for bit; a change to the
// arithmetic goes into the helpers here, so that both paths get it.
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
constexpr char kAntialiasAttr[] = "antialias";
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

// Step 2 along one axis: -0.5 <= v <= size - 0.5 (the picture's area, in
// pixel-centre coordinates), false for NaN (every comparison is false).
// size - 0.5 is exact in float32 for every size a plane can have (< 2^23).
// A plane of size 0 has no area: nothing is inside (-0.5 <= v <= -0.5 would
// let v = -0.5 in, and the sample read the texel before the plane).
BZNA_HOST_DEVICE bool InsideAxis(float v, int size) {
  return size > 0 && v >= -0.5f && v <= static_cast<float>(size) - 0.5f;
}

// Step 2, written as "not inside" so that NaN is out of bounds too; W' = 0
// gives an infinity or a NaN, also out.
BZNA_HOST_DEVICE bool OutOfBounds(SourcePoint p, int coded_width,
                                  int coded_height) {
  return !(InsideAxis(p.x, coded_width) && InsideAxis(p.y, coded_height));
}

// Step 4's chroma coordinate of luma coordinate v: chroma is sited at the
// centre of each 2x2 luma block (chroma_sample_loc_type 1).
BZNA_HOST_DEVICE float ChromaCoordinate(float v) { return v / 2.0f - 0.25f; }

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

// A bilinear sample along one axis of a plane of `size` texels at c: the two
// texels it reads (clamped to the plane) and the weight of the second.
struct AxisTap {
  int i0, i1;
  float a;
};

BZNA_HOST_DEVICE AxisTap MakeAxisTap(float c, int size) {
  const int i = FloorToInt(c);
  AxisTap t;
  t.a = c - static_cast<float>(i);  // exact: i == floorf(c) < 2^24
  t.i0 = ClampIndex(i, size);
  t.i1 = ClampIndex(i + 1, size);
  return t;
}

// The linear interpolation of every bilinear sample, (1 - a) v0 + a v1 in
// float32; V is float, or (in lib/warp_rows.h) four floats at a time, lane by
// lane the same operations.
template <typename V>
BZNA_HOST_DEVICE V Lerp(V v0, V v1, float a) {
  return (1.0f - a) * v0 + a * v1;
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
  const AxisTap tx = MakeAxisTap(x, plane.width);
  const AxisTap ty = MakeAxisTap(y, plane.height);
  BilinearTaps t;
  t.a = tx.a;
  t.b = ty.a;
  t.x0 = tx.i0 * plane.col_stride;
  t.x1 = tx.i1 * plane.col_stride;
  t.y0 = ty.i0 * plane.row_stride;
  t.y1 = ty.i1 * plane.row_stride;
  return t;
}

// Bilinear sample with fetches clamped to the plane: (1 - a) v0 + a v1 along
// x on both rows, then the same along y, in float32.
template <typename T>
BZNA_HOST_DEVICE float Sample(const T* data, const BilinearTaps& t) {
  const float top = Lerp(static_cast<float>(data[t.y0 + t.x0]), static_cast<float>(data[t.y0 + t.x1]), t.a);
  const float bottom = Lerp(static_cast<float>(data[t.y1 + t.x0]), static_cast<float>(data[t.y1 + t.x1]), t.a);
  return Lerp(top, bottom, t.b);
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

// Four float32 lanes (a GCC/Clang vector extension), for the CPU's row path
// (lib/warp_rows.h), which runs the formulas below on four output pixels at
// once: arithmetic is lane by lane, each lane the float32 operations of one
// pixel alone (no contraction either, with -ffp-contract=off).
#if defined(__GNUC__) && !defined(__CUDACC__)
#define BZNA_WARP_VEC4 1
typedef float Vec4 __attribute__((vector_size(16)));
typedef int32_t Vec4i __attribute__((vector_size(16)));

inline Vec4 Splat(float v) { return Vec4{v, v, v, v}; }

// RoundAndClamp on each lane: the portable form above, lane by lane.
inline Vec4 RoundAndClamp(Vec4 v) {
  const Vec4 zero = Splat(0.0f);
  v = v > zero ? v : zero;  // NaN -> 0
  v = v < Splat(255.0f) ? v : Splat(255.0f);
  const Vec4 t = __builtin_convertvector(__builtin_convertvector(v, Vec4i), Vec4);
  return t + (v - t >= Splat(0.5f) ? Splat(1.0f) : zero);
}
#endif

// The RGB op's treatment of an interpolated value: uint8 sources are
// quantised like the YUV path, float sources are left as interpolated.
template <typename V>
BZNA_HOST_DEVICE V FinishSample(V v, uint8_t /*source_tag*/) {
  return RoundAndClamp(v);
}
template <typename V>
BZNA_HOST_DEVICE V FinishSample(V v, float /*source_tag*/) {
  return v;
}

// Step 5 from the interpolated Y, Cb and Cr.
template <typename V>
BZNA_HOST_DEVICE void YuvToRgb(V lum, V cb, V cr, V (&rgb)[3]) {
  const V cb_c = cb - kChromaOffset;
  const V cr_c = cr - kChromaOffset;
  rgb[0] = RoundAndClamp(lum + kCrToR * cr_c);
  rgb[1] = RoundAndClamp(lum - kCbToG * cb_c - kCrToG * cr_c);
  rgb[2] = RoundAndClamp(lum + kCbToB * cb_c);
}

// Step 6 for channel c.
template <typename V>
BZNA_HOST_DEVICE V Normalize(V v, const ColorTransform& color, int c) {
  return (v - color.bias[c]) * color.norm[c];
}

// ------------------------------------------------------------ Antialiasing
//
// A bilinear sample of one point aliases once neighbouring output pixels are
// more than a texel apart in the source. With antialias, an output pixel
// whose matrix reduces averages the texels of its footprint instead: the
// triangle filter of Pillow's antialiased BILINEAR resize (and of
// tf.image.resize(antialias=True)), laid in the local frame of the
// output->source map.
//
// The columns u and v of the map's Jacobian at the pixel are the source-space
// steps of one output pixel along x and along y (the matrix's 2x2 part for an
// affine map; the derivative at the pixel for a projective one). Each is
// stretched to at least one texel (where the map does not reduce along it,
// the filter is bilinear's own tent there) and shortened to at most
// kMaxFootprint texels. With F = [u v] so adjusted and d = t - p the offset of
// texel t from the source point, (a, b) = F^-1 d, texel t weighs
// max(0, 1 - |a|) max(0, 1 - |b|), and the pixel is the weighted mean of the
// texels of the plane. When F is diagonal (resizes, crops, flips: most warps)
// this is Pillow's separable triangle of support s = |u| along x and |v|
// along y, at any (not only integer) scale, and the weights are computed per
// column and per row; texels outside the plane are left out and the weights
// renormalised, as Pillow and TensorFlow do at the edges. Rotated and sheared
// footprints get the same triangle along u and v (a parallelogram).
//
// Where neither column is longer than one texel (kMinReduction), or the map
// is degenerate (a zero, infinite or NaN column), the pixel is the point
// sample, bit for bit: upsampling and 1:1 warps, rotations included, are
// unchanged. Chroma planes are half-size, so their Jacobian is half the
// luma's, then lengthened (LengthenChromaColumn): a 2x luma reduction filters
// chroma too.
//
// Out of bounds is decided by the centre point alone (step 2), as without
// antialias: a pixel whose centre is inside gets the in-plane part of its
// footprint. Beyond a kMaxFootprint-times reduction the filter stops
// widening (some aliasing returns) so that a pixel's cost stays bounded.
//
// Sums run in a fixed order in float32, like everything else here, so the
// NumPy reference can agree.

// The longest footprint column, in texels: an axis-aligned pixel reads at
// most 2 * 16 texels along each axis.
constexpr float kMaxFootprint = 16.0f;
// A column reduces when it is longer than this: a 1:1 rotation, whose
// columns come out of float32 a rounding error longer than 1, stays the
// point sample.
constexpr float kMinReduction = 1.001f;
// Largest finite float32.
constexpr float kMaxFloat = 3.40282347e+38f;

// The footprint of one output pixel: columns u = (ux, uy) and v = (vx, vy),
// each at least one texel long (or a point sample when `point`).
struct Footprint {
  float ux, uy;
  float vx, vy;
  bool point;
};

// Column (dx, dy) stretched to at least 1 and at most kMaxFootprint texels.
// False for a zero, NaN or infinite column.
BZNA_HOST_DEVICE bool FootprintColumn(float* dx, float* dy, bool* reduces) {
  const float length = sqrtf(*dx * *dx + *dy * *dy);
  if (!(length > 0.0f && length <= kMaxFloat)) return false;
  *reduces = length > kMinReduction;
  if (length < 1.0f || length > kMaxFootprint) {
    const float target = length < 1.0f ? 1.0f : kMaxFootprint;
    *dx = *dx * target / length;
    *dy = *dy * target / length;
  }
  return true;
}

// A 4:2:0 chroma column, half the luma's (length c = L / 2), lengthened to
// sqrt(c^2 + 1) chroma texels. What a resize of the RGB picture does to
// chroma is the luma's triangle over chroma upsampled (bilinearly) to the
// luma's grid: two triangles, of half-widths c and 1 chroma texel, whose
// spreads (c^2 / 6 and 1 / 6) add up to that of one triangle of this
// length. At a 2x reduction it weighs a chroma texel and its neighbours
// 0.63 / 0.18, where tf.image.resize's weigh them 0.625 / 0.1875; c for
// large reductions. Half the luma's alone was a point (bilinear) sample up
// to 2x, and colour detail aliased.
BZNA_HOST_DEVICE void LengthenChromaColumn(float* dx, float* dy) {
  const float length = sqrtf(*dx * *dx + *dy * *dy);
  if (!(length > 0.0f && length <= kMaxFloat)) return;
  const float target = sqrtf(length * length + 1.0f);
  *dx = *dx * target / length;
  *dy = *dy * target / length;
}

// The footprint of output pixel (x, y), whose source point is p, in a plane
// `scale` times the size of the one M addresses (1 for luma and RGB, 0.5 for
// 4:2:0 chroma, whose columns are lengthened: LengthenChromaColumn).
// d(X'/W')/dx = (m0 - X m6) / W', and so on.
BZNA_HOST_DEVICE Footprint MakeFootprint(const float* m, float x, float y, SourcePoint p, float scale) {
  const float wp = (m[6] * x + m[7] * y) + m[8];
  Footprint f;
  f.ux = (m[0] - p.x * m[6]) / wp * scale;
  f.uy = (m[3] - p.y * m[6]) / wp * scale;
  f.vx = (m[1] - p.x * m[7]) / wp * scale;
  f.vy = (m[4] - p.y * m[7]) / wp * scale;
  if (scale < 1.0f) {
    LengthenChromaColumn(&f.ux, &f.uy);
    LengthenChromaColumn(&f.vx, &f.vy);
  }
  bool u_reduces = false, v_reduces = false;
  const bool ok = FootprintColumn(&f.ux, &f.uy, &u_reduces) && FootprintColumn(&f.vx, &f.vy, &v_reduces);
  f.point = !ok || !(u_reduces || v_reduces);
  return f;
}

// Pillow's triangle: 1 - |t|, or 0 beyond one.
BZNA_HOST_DEVICE float Triangle(float t) {
  const float w = 1.0f - fabsf(t);
  return w > 0.0f ? w : 0.0f;
}

// The texels [first, last] within `reach` of c along one axis of a plane of
// `size` texels (no more than it holds).
BZNA_HOST_DEVICE void TexelRange(float c, float reach, int size, int* first, int* last) {
  *first = ClampIndex(FloorToInt(c - reach) + 1, size);
  *last = ClampIndex(FloorToInt(c + reach), size);
}

// Texels along one axis of a footprint of half-width kMaxFootprint, at most.
constexpr int kMaxWindow = 2 * static_cast<int>(kMaxFootprint) + 2;

// The weights of texels first .. first + count - 1 along one axis of an
// axis-aligned footprint of half-width `support` around c, and their sum (in
// order).
struct AxisWeights {
  int first;
  int count;
  float sum;
  float weight[kMaxWindow];
};

BZNA_HOST_DEVICE void MakeAxisWeights(float c, float support, int size, AxisWeights* w) {
  int last;
  TexelRange(c, support, size, &w->first, &last);
  w->count = last - w->first + 1;
  const float inverse = 1.0f / support;
  w->sum = 0.0f;
  for (int i = 0; i < w->count; ++i) {
    w->weight[i] = Triangle((static_cast<float>(w->first + i) - c) * inverse);
    w->sum += w->weight[i];
  }
}

// kPlanes planes sharing `plane`'s size and strides, sampled at (x, y)
// through footprint f into value[]: the point sample when f is one, else the
// weighted mean of the footprint's texels (rows in order, each a sum over its
// texels in order, then divided by the sum of the weights).
template <typename T, int kPlanes>
BZNA_HOST_DEVICE void SampleFootprint(const Plane<T>& plane, const T* const (&data)[kPlanes],
                                      const Footprint& f, float x, float y, float (&value)[kPlanes]) {
  if (!f.point) {
    for (int c = 0; c < kPlanes; ++c) value[c] = 0.0f;
    if (f.uy == 0.0f && f.vx == 0.0f) {
      // Diagonal: separable, one weight per column and per row.
      AxisWeights cols, rows;
      MakeAxisWeights(x, fabsf(f.ux), plane.width, &cols);
      MakeAxisWeights(y, fabsf(f.vy), plane.height, &rows);
      for (int r = 0; r < rows.count; ++r) {
        const int64_t row = (rows.first + r) * plane.row_stride;
        float line[kPlanes];
        for (int c = 0; c < kPlanes; ++c) line[c] = 0.0f;
        for (int i = 0; i < cols.count; ++i) {
          const int64_t at = row + (cols.first + i) * plane.col_stride;
          for (int c = 0; c < kPlanes; ++c) line[c] += cols.weight[i] * static_cast<float>(data[c][at]);
        }
        for (int c = 0; c < kPlanes; ++c) value[c] += rows.weight[r] * line[c];
      }
      const float total = cols.sum * rows.sum;
      if (total > 0.0f) {
        for (int c = 0; c < kPlanes; ++c) value[c] = value[c] / total;
        return;
      }
    } else {
      // General: (a, b) = F^-1 d per texel of the footprint's bounding box.
      const float det = f.ux * f.vy - f.vx * f.uy;
      const float i00 = f.vy / det, i01 = -f.vx / det;
      const float i10 = -f.uy / det, i11 = f.ux / det;
      int x0, x1, y0, y1;
      TexelRange(x, fabsf(f.ux) + fabsf(f.vx), plane.width, &x0, &x1);
      TexelRange(y, fabsf(f.uy) + fabsf(f.vy), plane.height, &y0, &y1);
      float total = 0.0f;
      for (int ty = y0; ty <= y1; ++ty) {
        const float dy = static_cast<float>(ty) - y;
        const int64_t row = ty * plane.row_stride;
        for (int tx = x0; tx <= x1; ++tx) {
          const float dx = static_cast<float>(tx) - x;
          const float w = Triangle(i00 * dx + i01 * dy) * Triangle(i10 * dx + i11 * dy);
          if (w > 0.0f) {
            const int64_t at = row + tx * plane.col_stride;
            for (int c = 0; c < kPlanes; ++c) value[c] += w * static_cast<float>(data[c][at]);
            total += w;
          }
        }
      }
      if (total > 0.0f) {
        for (int c = 0; c < kPlanes; ++c) value[c] = value[c] / total;
        return;
      }
    }
    // No texel weighs anything (an extreme shear): the point sample.
  }
  const BilinearTaps t = Taps(plane, x, y);
  for (int c = 0; c < kPlanes; ++c) value[c] = Sample(data[c], t);
}

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
    out[OutputIndex(layout, n, y, x, c)] = Normalize(rgb[c], color, c);
  }
}

// One whole output pixel of sample n from a 4:2:0 frame. The bounds test uses
// the luma plane's (coded) size; the chroma planes are half that, rounded up.
BZNA_HOST_DEVICE void WarpYuv420Pixel(const Plane<uint8_t>& luma,
                                      const Plane<uint8_t>& cb,
                                      const Plane<uint8_t>& cr, const float* m,
                                      const ColorTransform& color,
                                      const OutputLayout& layout, int64_t n,
                                      int64_t y, int64_t x, float* out,
                                      bool antialias) {
  const float fx = static_cast<float>(x), fy = static_cast<float>(y);
  const SourcePoint p = ApplyMatrix(m, fx, fy);
  if (OutOfBounds(p, luma.width, luma.height)) {
    WriteOob(color, layout, n, y, x, out);
    return;
  }
  const float xc = ChromaCoordinate(p.x);
  const float yc = ChromaCoordinate(p.y);
  float lum, cb_v, cr_v;
  if (antialias) {
    const uint8_t* const luma_data[1] = {luma.data};
    const uint8_t* const chroma_data[2] = {cb.data, cr.data};  // Cr has Cb's size
    float l[1], c[2];
    const Footprint luma_fp = MakeFootprint(m, fx, fy, p, 1.0f);
    SampleFootprint(luma, luma_data, luma_fp, p.x, p.y, l);
    // Chroma's columns are about half as long (lengthened): a point wherever the luma's is.
    const Footprint chroma_fp = luma_fp.point ? luma_fp : MakeFootprint(m, fx, fy, p, 0.5f);
    SampleFootprint(cb, chroma_data, chroma_fp, xc, yc, c);
    lum = l[0];
    cb_v = c[0];
    cr_v = c[1];
  } else {
    lum = SampleBilinear(luma, p.x, p.y);
    const BilinearTaps chroma = Taps(cb, xc, yc);  // Cr has Cb's size
    cb_v = Sample(cb.data, chroma);
    cr_v = Sample(cr.data, chroma);
  }
  float rgb[3];
  YuvToRgb(lum, cb_v, cr_v, rgb);
  WriteNormalized(rgb, color, layout, n, y, x, out);
}

// One whole output pixel of sample n from an RGB image; `channels[c]` samples
// channel c. T is uint8_t (result rounded and clamped) or float (not).
template <typename T>
BZNA_HOST_DEVICE void WarpRgbPixel(const Plane<T> channels[3], const float* m,
                                   const ColorTransform& color,
                                   const OutputLayout& layout, int64_t n,
                                   int64_t y, int64_t x, float* out,
                                   bool antialias) {
  const float fx = static_cast<float>(x), fy = static_cast<float>(y);
  const SourcePoint p = ApplyMatrix(m, fx, fy);
  if (OutOfBounds(p, channels[0].width, channels[0].height)) {
    WriteOob(color, layout, n, y, x, out);
    return;
  }
  float rgb[3];
  if (antialias) {
    const T* const data[3] = {channels[0].data, channels[1].data, channels[2].data};
    SampleFootprint(channels[0], data, MakeFootprint(m, fx, fy, p, 1.0f), p.x, p.y, rgb);
    for (int c = 0; c < 3; ++c) rgb[c] = FinishSample(rgb[c], T());
  } else {
    for (int c = 0; c < 3; ++c) {
      rgb[c] = FinishSample(SampleBilinear(channels[c], p.x, p.y), T());
    }
  }
  WriteNormalized(rgb, color, layout, n, y, x, out);
}

}  // namespace warp
}  // namespace bzna_tf

#endif  // BZNA_TF_LIB_WARP_H_
