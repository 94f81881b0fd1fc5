// Fuzzer-chosen warps for the harnesses of lib/warp.h: matrices, output
// sizes and layouts, and the checks every warped output must pass.

#ifndef BZNA_TF_FUZZ_WARP_PARAMS_H_
#define BZNA_TF_FUZZ_WARP_PARAMS_H_

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "fuzz/fuzz_common.h"
#include "lib/warp.h"

namespace bzna_tf {
namespace fuzz {

// A 3x3 output -> source matrix for a source of src_w x src_h and an output
// of out_w x out_h, in one of four forms: raw float32 bits (NaN, infinities,
// denormals, zero W'), an affine map (scale 1/16 to 16 per axis, any
// rotation, flips, a translation of up to about one source size), the same
// with small perspective terms, or an exact axis-aligned resize (the
// separable antialias path).
inline void MakeMatrix(Params& p, int src_w, int src_h, int out_w, int out_h, float m[9]) {
  const int form = p.Byte() % 4;
  if (form == 0) {
    for (int k = 0; k < 9; ++k) m[k] = p.Float();
    return;
  }
  const float sx = std::exp2((static_cast<int>(p.Byte()) - 128) / 32.0f) * (p.Byte() & 1 ? -1.0f : 1.0f);
  const float sy = std::exp2((static_cast<int>(p.Byte()) - 128) / 32.0f) * (p.Byte() & 1 ? -1.0f : 1.0f);
  const uint8_t angle = form == 3 ? 0 : p.Byte();
  const float t = angle * 6.28318530718f / 256.0f;
  const float c = angle ? std::cos(t) : 1.0f, s = angle ? std::sin(t) : 0.0f;
  const float tx = (static_cast<int>(p.Byte()) - 128) / 128.0f * src_w;
  const float ty = (static_cast<int>(p.Byte()) - 128) / 128.0f * src_h;
  // Source = centre + R S (output - output centre) + t.
  const float a = c * sx, b = -s * sy, d = s * sx, e = c * sy;
  const float ox = (out_w - 1) / 2.0f, oy = (out_h - 1) / 2.0f;
  m[0] = a;
  m[1] = b;
  m[2] = (src_w - 1) / 2.0f + tx - (a * ox + b * oy);
  m[3] = d;
  m[4] = e;
  m[5] = (src_h - 1) / 2.0f + ty - (d * ox + e * oy);
  m[6] = m[7] = 0.0f;
  m[8] = 1.0f;
  if (form == 2) {
    m[6] = (static_cast<int>(p.Byte()) - 128) / 4096.0f;
    m[7] = (static_cast<int>(p.Byte()) - 128) / 4096.0f;
  }
}

// What the warp writes is known in advance: the out-of-bounds colour (-1
// here), or a value in [lo, hi]; `integral` when it must be a whole number
// (uint8 and YCbCr sources are rounded). Bias 0 and norm 1 leave the RGB
// value as computed.
constexpr float kOobValue = -1.0f;

inline warp::ColorTransform PlainColor() {
  warp::ColorTransform color;
  for (int c = 0; c < 3; ++c) {
    color.bias[c] = 0.0f;
    color.norm[c] = 1.0f;
    color.oob[c] = kOobValue;
  }
  return color;
}

// An output buffer of `batch` images, every float set to a NaN that the
// warp never writes (it writes the OOB colour, never NaN, for a NaN point).
inline std::vector<float> Unwritten(size_t n) {
  const uint32_t bits = 0x7fc0beef;
  float f;
  std::memcpy(&f, &bits, 4);
  return std::vector<float>(n, f);
}

inline bool IsUnwritten(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  return bits == 0x7fc0beef;
}

// Image n of `out` holds only written values in {kOobValue} or [lo, hi]
// (whole numbers when `integral`); the other images are untouched.
inline void CheckOutput(const std::vector<float>& out, int64_t batch, int64_t n, int64_t image_floats,
                        float lo, float hi, bool integral, const char* what) {
  for (int64_t k = 0; k < batch * image_floats; ++k) {
    const float v = out[k];
    const bool mine = k / image_floats == n;
    if (!mine) {
      if (!IsUnwritten(v)) Fail(absl::StrCat(what, ": wrote float ", k, " of another image"));
      continue;
    }
    if (IsUnwritten(v)) Fail(absl::StrCat(what, ": left float ", k % image_floats, " of its image unwritten"));
    if (v == kOobValue) continue;
    if (!(v >= lo && v <= hi) || (integral && v != std::floor(v))) {
      Fail(absl::StrCat(what, ": float ", k % image_floats, " is ", v, ", expected ", integral ? "a whole number " : "",
                        "in [", lo, ", ", hi, "] or the OOB colour"));
    }
  }
}

}  // namespace fuzz
}  // namespace bzna_tf

#endif  // BZNA_TF_FUZZ_WARP_PARAMS_H_
