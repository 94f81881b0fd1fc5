// The CPU kernels' fast path for axis-aligned maps: lib/warp.h's per-pixel
// math, arranged a row at a time with what is constant along a row or a
// column computed once. Bit for bit the pixels WarpYuv420Pixel and
// WarpRgbPixel compute (tests/test_warp_rows.py holds both to the NumPy
// reference, exactly, on every kind of matrix); CPU only (std::vector,
// GCC/Clang vector extensions). The GPU runs the per-pixel functions, one
// thread per pixel.
//
// An axis-aligned matrix (m[1] = m[3] = m[6] = m[7] = 0: resizes, crops and
// flips, as RandomResizedCrop and CenterResizedCrop make them) maps output
// column x to one source X and output row y to one source Y: with y finite,
// m[1] * y is a zero whose sign is m[1]'s, so X' = (m[0] x + m[1] y) + m[2]
// has the same float32 value on every row, W' is m[8] on every pixel, and
// likewise for Y. Hence, exactly:
//   - X, the bounds test along x and the sampling weights of every column
//     (bilinear taps, or the footprint's column weights and their sum) are
//     computed once per image, per column; those of a row once per row;
//   - the footprint (lib/warp.h, "Antialiasing") is the same at every pixel
//     inside the picture: the derivative d(X'/W')/dx = (m[0] - X m[6]) / W'
//     is m[0] / W' wherever X is finite. It is computed once, at the first
//     pixel inside, and it is diagonal, so the filter is separable;
//   - a pixel's sum is a sum over its texel rows of each row's sum over its
//     texel columns; a texel row's sums depend on the source row and the
//     output column only, so each source row's sums (for every output
//     column) are computed once and kept in a small ring of rows that the
//     next output rows reuse (a reduction by s shares about 2 of its rows
//     with the next output row); the sums over rows and the colour
//     conversion then run on four output columns at a time, each lane the
//     float32 operations of one pixel in their per-pixel order.
// Other matrices (rotations, shears, perspective) go through the per-pixel
// functions: Prepare() returns false.
//
// Memory, per kernel thread: per output column a few words and (with the
// filter) its weights, at most 34 floats; the ring holds 2 to 64 rows of
// out_width floats per plane (64 at reductions past about 15x). Wider rows
// than fit kMaxRingFloats fall back to the per-pixel path.

#ifndef BZNA_TF_LIB_WARP_ROWS_H_
#define BZNA_TF_LIB_WARP_ROWS_H_

#include <stdint.h>
#include <string.h>

#include <vector>

#include "lib/warp.h"

#ifndef BZNA_WARP_VEC4
#error "lib/warp_rows.h needs the GCC/Clang vector extensions (see Vec4 in lib/warp.h)"
#endif

namespace bzna_tf {
namespace warp {

// Whether X depends on x only and Y on y only (and W' is constant).
inline bool AxisAligned(const float* m) {
  return m[1] == 0.0f && m[3] == 0.0f && m[6] == 0.0f && m[7] == 0.0f;
}

inline Vec4 Load4(const float* p) {
  Vec4 v;
  memcpy(&v, p, sizeof v);
  return v;
}

inline void Store4(float* p, Vec4 v) { memcpy(p, &v, sizeof v); }

// The most floats a ring of texel-row sums may hold (16 MiB); wider outputs
// take the per-pixel path.
constexpr int64_t kMaxRingFloats = int64_t{1} << 22;

// Planes of one size and strides (luma; Cb and Cr; R, G and B) sampled at
// the same coordinates, a row at a time: the per-column tables of one image,
// and the ring of texel-row sums.
template <typename T, int kPlanes>
class PlaneRows {
 public:
  // Columns lo..hi of an output row `width` wide: coords[x] is column x's
  // coordinate in this plane, used where inside[x]. `filter`: the
  // footprint's separable filter with half-widths support_x, support_y (>= 1);
  // else the bilinear point sample. False when the ring would not fit
  // kMaxRingFloats.
  bool Prepare(const Plane<T>& plane, const T* const (&data)[kPlanes], bool filter, float support_x,
               float support_y, const float* coords, const uint8_t* inside, int64_t lo, int64_t hi,
               int64_t width) {
    plane_ = plane;
    for (int c = 0; c < kPlanes; ++c) data_[c] = data[c];
    filter_ = filter;
    support_y_ = support_y;
    coords_ = coords;
    inside_ = inside;
    lo_ = lo;
    hi_ = hi;
    pad_ = (width + 3) / 4 * 4;
    // Texel rows of one output row: count <= floor(2 s) + 1 (TexelRange); a
    // margin for float32 rounding, and a power of two.
    const int rows = filter ? static_cast<int>(2.0f * support_y) + 4 : 2;
    slots_ = 2;
    while (slots_ < rows) slots_ *= 2;
    if (static_cast<int64_t>(slots_) * kPlanes * pad_ > kMaxRingFloats) return false;
    ring_.assign(static_cast<size_t>(slots_) * kPlanes * pad_, 0.0f);
    tags_.assign(slots_, -1);
    for (int c = 0; c < kPlanes; ++c) value_[c].assign(pad_, 0.0f);

    const int64_t cs = plane.col_stride;
    offset0_.assign(pad_, 0);
    offset1_.assign(pad_, 0);
    weight_of_1_.assign(pad_, 0.0f);
    count_.assign(pad_, 0);
    start_.assign(pad_, 0);
    sum_.assign(pad_, 1.0f);  // columns outside: harmless, never read back
    weights_.clear();
    min_sum_ = 1.0f;
    for (int64_t x = lo; x <= hi; ++x) {
      if (!inside[x]) continue;
      if (filter) {
        AxisWeights w;
        MakeAxisWeights(coords[x], support_x, plane.width, &w);
        offset0_[x] = w.first * cs;
        count_[x] = w.count > 0 ? w.count : 0;
        start_[x] = static_cast<int>(weights_.size());
        weights_.insert(weights_.end(), w.weight, w.weight + count_[x]);
        sum_[x] = w.sum;
        min_sum_ = w.sum < min_sum_ ? w.sum : min_sum_;
      } else {
        const AxisTap t = MakeAxisTap(coords[x], plane.width);
        offset0_[x] = t.i0 * cs;
        offset1_[x] = t.i1 * cs;
        weight_of_1_[x] = t.a;
      }
    }
    return true;
  }

  // Samples every plane at row coordinate cy for columns lo..hi (and the
  // other lanes of their blocks of four, which are left meaningless).
  void Row(float cy) {
    const int64_t first_block = lo_ / 4 * 4;
    if (filter_) {
      AxisWeights rows;
      MakeAxisWeights(cy, support_y_, plane_.height, &rows);
      const float* sums[kMaxWindow][kPlanes];
      for (int r = 0; r < rows.count; ++r) {
        const float* ring_row = EnsureRow(rows.first + r);
        for (int c = 0; c < kPlanes; ++c) sums[r][c] = ring_row + c * pad_;
      }
      for (int64_t x = first_block; x <= hi_; x += 4) {
        const Vec4 total = Load4(&sum_[x]) * rows.sum;  // cols.sum * rows.sum
        for (int c = 0; c < kPlanes; ++c) {
          Vec4 v = Splat(0.0f);
          for (int r = 0; r < rows.count; ++r) v += rows.weight[r] * Load4(sums[r][c] + x);
          Store4(&value_[c][x], v / total);
        }
      }
      // The point sample where a pixel's weights sum to nothing; never with a
      // usable footprint (min_sum_ * rows.sum > 0 bounds every total below).
      if (!(min_sum_ * rows.sum > 0.0f)) {
        for (int64_t x = lo_; x <= hi_; ++x) {
          if (!inside_[x] || sum_[x] * rows.sum > 0.0f) continue;
          const BilinearTaps t = Taps(plane_, coords_[x], cy);
          for (int c = 0; c < kPlanes; ++c) value_[c][x] = Sample(data_[c], t);
        }
      }
    } else {
      const AxisTap t = MakeAxisTap(cy, plane_.height);
      const float* top = EnsureRow(t.i0);
      const float* bottom = EnsureRow(t.i1);
      for (int c = 0; c < kPlanes; ++c) {
        for (int64_t x = first_block; x <= hi_; x += 4) {
          Store4(&value_[c][x], Lerp(Load4(top + c * pad_ + x), Load4(bottom + c * pad_ + x), t.a));
        }
      }
    }
  }

  const float* value(int c) const { return value_[c].data(); }

 private:
  // The ring slot holding source row `row`'s sums (each plane's pad_ floats
  // in turn), computed if it is not there.
  const float* EnsureRow(int row) {
    const int slot = row & (slots_ - 1);
    float* sums = &ring_[static_cast<size_t>(slot) * kPlanes * pad_];
    if (tags_[slot] == row) return sums;
    tags_[slot] = row;
    const int64_t cs = plane_.col_stride;
    const T* src[kPlanes];
    for (int c = 0; c < kPlanes; ++c) src[c] = data_[c] + row * plane_.row_stride;
    for (int64_t x = lo_; x <= hi_; ++x) {
      if (filter_) {
        // A texel row of the footprint: the sum over its columns, in order.
        float line[kPlanes];
        for (int c = 0; c < kPlanes; ++c) line[c] = 0.0f;
        const float* w = &weights_[start_[x]];
        const int64_t at = offset0_[x];
        for (int i = 0; i < count_[x]; ++i) {
          for (int c = 0; c < kPlanes; ++c) line[c] += w[i] * static_cast<float>(src[c][at + i * cs]);
        }
        for (int c = 0; c < kPlanes; ++c) sums[c * pad_ + x] = line[c];
      } else {
        for (int c = 0; c < kPlanes; ++c) {
          sums[c * pad_ + x] = Lerp(static_cast<float>(src[c][offset0_[x]]),
                                    static_cast<float>(src[c][offset1_[x]]), weight_of_1_[x]);
        }
      }
    }
    return sums;
  }

  Plane<T> plane_;
  const T* data_[kPlanes];
  bool filter_ = false;
  float support_y_ = 1.0f;
  const float* coords_ = nullptr;
  const uint8_t* inside_ = nullptr;
  int64_t lo_ = 0, hi_ = -1, pad_ = 0;
  int slots_ = 2;
  std::vector<float> ring_;
  std::vector<int> tags_;
  std::vector<float> value_[kPlanes];
  // Per output column: bilinear offsets (times col_stride) and weight, or the
  // first texel's offset, the weights' count, start in weights_ and sum.
  std::vector<int64_t> offset0_, offset1_;
  std::vector<float> weight_of_1_;
  std::vector<int> count_, start_;
  std::vector<float> sum_, weights_;
  float min_sum_ = 1.0f;
};

// What the YUV and RGB paths share: the matrix's columns and rows, the
// footprint, and the loop that writes rows of normalised pixels. A subclass
// prepares its planes and samples a row of them (SampleRow).
class AxisAlignedRows {
 public:
  virtual ~AxisAlignedRows() = default;

  // Output rows begin..end - 1 of sample n, once the subclass's Prepare took
  // the matrix.
  void Rows(const ColorTransform& color, const OutputLayout& layout, int64_t n, int64_t begin, int64_t end,
            float* out) {
    StartRows(color);
    for (int64_t y = begin; y < end; ++y) {
      float sy;
      const bool inside = RowInside(y, &sy);
      if (inside) SampleRow(sy, color);
      WriteRow(color, layout, n, y, inside, out);
    }
  }

 protected:
  // Samples the planes at source row coordinate `source_y` (a row inside)
  // and sets every block of columns lo..hi through Finish: what the YUV and
  // RGB paths do differently. A virtual call per row, not per pixel.
  virtual void SampleRow(float source_y, const ColorTransform& color) = 0;

  // Columns, bounds and the first pixel inside for matrix m, output
  // width x height, source plane width x height (the bounds test's).
  // False when m is not axis-aligned.
  bool PrepareAxes(const float* m, int64_t out_width, int64_t out_height, int width, int height) {
    if (!AxisAligned(m)) return false;
    m_ = m;
    width_ = out_width;
    pad_ = (out_width + 3) / 4 * 4;
    source_height_ = height;
    xs_.assign(pad_, 0.0f);
    inside_.assign(pad_, 0);
    lo_ = 0;
    hi_ = -1;
    for (int64_t x = 0; x < out_width; ++x) {
      xs_[x] = ApplyMatrix(m, static_cast<float>(x), 0.0f).x;
      inside_[x] = InsideAxis(xs_[x], width);
      if (inside_[x]) {
        if (hi_ < lo_) lo_ = x;
        hi_ = x;
      }
    }
    any_inside_ = false;
    if (hi_ >= lo_) {
      for (int64_t y = 0; y < out_height && !any_inside_; ++y) {
        if (InsideAxis(ApplyMatrix(m, 0.0f, static_cast<float>(y)).y, height)) {
          any_inside_ = true;
          first_inside_y_ = y;
        }
      }
    }
    lanes_inside_.assign(pad_, 0);
    for (int64_t x = 0; x < out_width; ++x) lanes_inside_[x] = inside_[x] ? -1 : 0;
    for (int c = 0; c < 3; ++c) rgb_[c].assign(pad_, 0.0f);
    return true;
  }

  // The footprint of every pixel inside, in a plane `scale` times M's: that
  // of the first one. `usable`: a point, or separable.
  Footprint FixedFootprint(float scale, bool* usable) const {
    const float fx = static_cast<float>(lo_), fy = static_cast<float>(first_inside_y_);
    const Footprint f = MakeFootprint(m_, fx, fy, ApplyMatrix(m_, fx, fy), scale);
    *usable = f.point || (f.uy == 0.0f && f.vx == 0.0f);
    return f;
  }

  // Channel c of the block of columns x..x + 3: the normalised value, or the
  // out-of-bounds colour in the lanes outside.
  void Finish(int64_t x, int c, Vec4 rgb, const ColorTransform& color) {
    Vec4i inside;
    memcpy(&inside, &lanes_inside_[x], sizeof inside);
    Store4(&rgb_[c][x], inside ? Normalize(rgb, color, c) : Splat(color.oob[c]));
  }

  const float* m_ = nullptr;
  int64_t width_ = 0, pad_ = 0;
  int source_height_ = 0;
  std::vector<float> xs_;
  std::vector<uint8_t> inside_;
  int64_t lo_ = 0, hi_ = -1;  // the columns inside are within lo..hi
  bool any_inside_ = false;
  int64_t first_inside_y_ = 0;
  std::vector<int32_t> lanes_inside_;  // inside_ as vector masks: -1 inside, 0 outside
  std::vector<float> rgb_[3];  // a row of normalised output, per channel

 private:
  // Row y's source coordinate, and whether it is inside.
  bool RowInside(int64_t y, float* source_y) const {
    *source_y = ApplyMatrix(m_, 0.0f, static_cast<float>(y)).y;
    return any_inside_ && InsideAxis(*source_y, source_height_);
  }

  // Fills the row of output pixels with the out-of-bounds colour, where the
  // blocks of columns lo..hi (Finish) do not overwrite it.
  void StartRows(const ColorTransform& color) {
    for (int c = 0; c < 3; ++c) {
      for (int64_t x = 0; x < pad_; ++x) rgb_[c][x] = color.oob[c];
    }
  }

  // Output row y of sample n: rgb_, or the out-of-bounds colour where the
  // row is outside.
  void WriteRow(const ColorTransform& color, const OutputLayout& layout, int64_t n, int64_t y,
                bool row_inside, float* out) const {
    if (!row_inside) {
      for (int64_t x = 0; x < width_; ++x) WriteOob(color, layout, n, y, x, out);
      return;
    }
    const float* r = rgb_[0].data();
    const float* g = rgb_[1].data();
    const float* b = rgb_[2].data();
    if (layout.channels_first) {
      for (int c = 0; c < 3; ++c) {
        memcpy(out + OutputIndex(layout, n, y, 0, c), rgb_[c].data(), width_ * sizeof(float));
      }
      return;
    }
    float* o = out + OutputIndex(layout, n, y, 0, 0);
    for (int64_t x = 0; x < width_; ++x) {
      o[3 * x] = r[x];
      o[3 * x + 1] = g[x];
      o[3 * x + 2] = b[x];
    }
  }
};

// WarpYuv420Pixel on whole rows.
class YuvRows final : public AxisAlignedRows {
 public:
  // Prepares sample n's planes and matrix; false: use WarpYuv420Pixel.
  bool Prepare(const Plane<uint8_t>& luma, const Plane<uint8_t>& cb, const Plane<uint8_t>& cr, const float* m,
               bool antialias, int64_t out_width, int64_t out_height) {
    if (!PrepareAxes(m, out_width, out_height, luma.width, luma.height)) return false;
    if (!any_inside_) return true;
    Footprint luma_fp = {1.0f, 0.0f, 0.0f, 1.0f, true}, chroma_fp = luma_fp;
    if (antialias) {
      bool usable_luma = false, usable_chroma = true;
      luma_fp = FixedFootprint(1.0f, &usable_luma);
      if (!luma_fp.point) chroma_fp = FixedFootprint(0.5f, &usable_chroma);
      if (!usable_luma || !usable_chroma) return false;
    }
    xcs_.assign(pad_, 0.0f);
    for (int64_t x = lo_; x <= hi_; ++x) {
      if (inside_[x]) xcs_[x] = ChromaCoordinate(xs_[x]);
    }
    const uint8_t* const luma_data[1] = {luma.data};
    const uint8_t* const chroma_data[2] = {cb.data, cr.data};  // Cr has Cb's size
    return luma_.Prepare(luma, luma_data, !luma_fp.point, fabsf(luma_fp.ux), fabsf(luma_fp.vy), xs_.data(),
                         inside_.data(), lo_, hi_, out_width) &&
           chroma_.Prepare(cb, chroma_data, !chroma_fp.point, fabsf(chroma_fp.ux), fabsf(chroma_fp.vy),
                           xcs_.data(), inside_.data(), lo_, hi_, out_width);
  }

 private:
  void SampleRow(float sy, const ColorTransform& color) override {
    luma_.Row(sy);
    chroma_.Row(ChromaCoordinate(sy));
    const float* lum = luma_.value(0);
    const float* cb = chroma_.value(0);
    const float* cr = chroma_.value(1);
    for (int64_t x = lo_ / 4 * 4; x <= hi_; x += 4) {
      Vec4 rgb[3];
      YuvToRgb(Load4(lum + x), Load4(cb + x), Load4(cr + x), rgb);
      for (int c = 0; c < 3; ++c) Finish(x, c, rgb[c], color);
    }
  }

 private:
  std::vector<float> xcs_;
  PlaneRows<uint8_t, 1> luma_;
  PlaneRows<uint8_t, 2> chroma_;
};

// WarpRgbPixel on whole rows.
template <typename T>
class RgbRows final : public AxisAlignedRows {
 public:
  // Prepares sample n's channels and matrix; false: use WarpRgbPixel.
  bool Prepare(const Plane<T> (&channels)[3], const float* m, bool antialias, int64_t out_width,
               int64_t out_height) {
    if (!PrepareAxes(m, out_width, out_height, channels[0].width, channels[0].height)) return false;
    if (!any_inside_) return true;
    Footprint fp = {1.0f, 0.0f, 0.0f, 1.0f, true};
    if (antialias) {
      bool usable = false;
      fp = FixedFootprint(1.0f, &usable);
      if (!usable) return false;
    }
    const T* const data[3] = {channels[0].data, channels[1].data, channels[2].data};
    return planes_.Prepare(channels[0], data, !fp.point, fabsf(fp.ux), fabsf(fp.vy), xs_.data(), inside_.data(),
                           lo_, hi_, out_width);
  }

 private:
  void SampleRow(float sy, const ColorTransform& color) override {
    planes_.Row(sy);
    for (int c = 0; c < 3; ++c) {
      const float* v = planes_.value(c);
      for (int64_t x = lo_ / 4 * 4; x <= hi_; x += 4) {
        Finish(x, c, FinishSample(Load4(v + x), T()), color);
      }
    }
  }

 private:
  PlaneRows<T, 3> planes_;
};

}  // namespace warp
}  // namespace bzna_tf

#endif  // BZNA_TF_LIB_WARP_ROWS_H_
