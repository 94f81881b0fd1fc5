// libFuzzer harness: lib/warp.h's public entry points (WarpYuv420Pixel,
// WarpRgbPixel for uint8 and float sources) over fuzzer-chosen source sizes
// and row strides, matrices, output sizes, layouts (NHWC, NCHW) and antialias
// on or off, on a frame whose texels are the fuzzer's bytes; then the CPU
// kernels' row path (lib/warp_rows.h: YuvRows, RgbRows), over the output's
// rows split in two at a fuzzer-chosen row as the kernels' threads split them,
// which must write the same bits as the per-pixel functions wherever it takes
// the matrix.
//
// Each plane is its own heap buffer of exactly its rows times its stride,
// and the padding at the end of each row is poisoned for AddressSanitizer,
// so a read one texel past a row's width is caught as well as one past the
// plane. The output is checked: every pixel of the sample written (and no
// other sample's), each value the OOB colour or an RGB value in range.

#include <sanitizer/asan_interface.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz/fuzz_common.h"
#include "fuzz/warp_params.h"
#include "lib/warp.h"
#include "lib/warp_rows.h"

namespace {

using bzna_tf::fuzz::Params;

constexpr int kMaxSide = 48;
constexpr int kMaxOutput = 24;
constexpr int64_t kBatch = 2;
// Bytes at the front that may be parameters (at most 17 + 1 + 1 + 36 + 1 + 1).
constexpr int kParamBytes = 57;

// Runs `rows` (a YuvRows or RgbRows, prepared by `prepare`) over output rows
// [0, split) and [split, out_h), each part with its own object as each kernel
// thread has, into a fresh buffer; when it takes the matrix, its output must
// equal the per-pixel output bit for bit.
template <typename Rows, typename PrepareFn>
void CheckRowPath(const std::vector<float>& per_pixel, const bzna_tf::warp::ColorTransform& color,
                  const bzna_tf::warp::OutputLayout& layout, int64_t n, int out_h, int split, PrepareFn prepare,
                  const char* what) {
  std::vector<float> out = bzna_tf::fuzz::Unwritten(per_pixel.size());
  const int64_t parts[3] = {0, split, out_h};
  for (int k = 0; k < 2; ++k) {
    if (parts[k] == parts[k + 1]) continue;
    Rows rows;
    if (!prepare(&rows)) return;  // the per-pixel path handles this matrix
    rows.Rows(color, layout, n, parts[k], parts[k + 1], out.data());
  }
  if (memcmp(out.data(), per_pixel.data(), out.size() * sizeof(float)) != 0) {
    for (size_t k = 0; k < out.size(); ++k) {
      uint32_t a, b;
      memcpy(&a, &out[k], 4);
      memcpy(&b, &per_pixel[k], 4);
      if (a != b) {
        bzna_tf::fuzz::Fail(absl::StrCat(what, ": the row path wrote ", out[k], " at output index ", k,
                                         ", the per-pixel function ", per_pixel[k]));
      }
    }
  }
}

// A plane of w x h texels, `pad` unused (poisoned) texels after each row.
template <typename T>
struct OwnedPlane {
  std::vector<T> data;
  bzna_tf::warp::Plane<T> plane;

  OwnedPlane(int w, int h, int pad, int col_stride, const std::vector<uint8_t>& texels, size_t* next) {
    const int64_t row = static_cast<int64_t>(w) * col_stride + pad;
    data.resize(row * h);
    for (int64_t k = 0; k < static_cast<int64_t>(data.size()); ++k) {
      const uint8_t b = texels.empty() ? 0 : texels[(*next)++ % texels.size()];
      data[k] = static_cast<T>(b) + (sizeof(T) == 4 ? static_cast<T>(b & 7) / static_cast<T>(8) : T());
    }
    if (pad) {
      for (int y = 0; y < h; ++y) {
        ASAN_POISON_MEMORY_REGION(data.data() + y * row + static_cast<int64_t>(w) * col_stride, pad * sizeof(T));
      }
    }
    plane = {data.data(), w, h, row, col_stride};
  }
  ~OwnedPlane() { ASAN_UNPOISON_MEMORY_REGION(data.data(), data.size() * sizeof(T)); }
};

template <typename T>
void WarpRgb(Params& p, int w, int h, int out_w, int out_h, const bzna_tf::warp::OutputLayout& layout,
             bool antialias, const std::vector<uint8_t>& texels) {
  // Interleaved RGB: one buffer, three views (channel c starts at data + c).
  size_t next = 0;
  const int pad = p.Byte() % 4;
  OwnedPlane<T> rgb(w, h, pad, 3, texels, &next);
  bzna_tf::warp::Plane<T> channels[3];
  for (int c = 0; c < 3; ++c) {
    channels[c] = rgb.plane;
    channels[c].data = rgb.data.data() + c;
  }
  float m[9];
  bzna_tf::fuzz::MakeMatrix(p, w, h, out_w, out_h, m);
  const int64_t n = p.Byte() % kBatch;
  const int64_t image = int64_t{3} * out_w * out_h;
  std::vector<float> out = bzna_tf::fuzz::Unwritten(kBatch * image);
  const bzna_tf::warp::ColorTransform color = bzna_tf::fuzz::PlainColor();
  for (int64_t y = 0; y < out_h; ++y) {
    for (int64_t x = 0; x < out_w; ++x) {
      bzna_tf::warp::WarpRgbPixel(channels, m, color, layout, n, y, x, out.data(), antialias);
    }
  }
  const bool is_float = sizeof(T) == 4;
  // A float source's values are weighted means: within its range, up to rounding.
  bzna_tf::fuzz::CheckOutput(out, kBatch, n, image, is_float ? -0.01f : 0.0f, is_float ? 256.01f : 255.0f,
                             !is_float, is_float ? "WarpRgbPixel<float>" : "WarpRgbPixel<uint8_t>");
  CheckRowPath<bzna_tf::warp::RgbRows<T>>(
      out, color, layout, n, out_h, p.Byte() % (out_h + 1),
      [&](bzna_tf::warp::RgbRows<T>* rows) { return rows->Prepare(channels, m, antialias, out_w, out_h); },
      is_float ? "RgbRows<float>" : "RgbRows<uint8_t>");
}

void WarpYuv(Params& p, int w, int h, int out_w, int out_h, const bzna_tf::warp::OutputLayout& layout,
             bool antialias, const std::vector<uint8_t>& texels) {
  size_t next = 0;
  // 4:2:0: chroma planes of (w+1)/2 x (h+1)/2, as kernels/warp_common.h
  // requires of the tensors and FFmpeg lays out decoded frames.
  const int cw = (w + 1) / 2, ch = (h + 1) / 2;
  OwnedPlane<uint8_t> luma(w, h, p.Byte() % 4, 1, texels, &next);
  OwnedPlane<uint8_t> cb(cw, ch, p.Byte() % 4, 1, texels, &next);
  OwnedPlane<uint8_t> cr(cw, ch, cb.plane.row_stride - cw, 1, texels, &next);  // Cr has Cb's stride
  float m[9];
  bzna_tf::fuzz::MakeMatrix(p, w, h, out_w, out_h, m);
  const int64_t n = p.Byte() % kBatch;
  const int64_t image = int64_t{3} * out_w * out_h;
  std::vector<float> out = bzna_tf::fuzz::Unwritten(kBatch * image);
  const bzna_tf::warp::ColorTransform color = bzna_tf::fuzz::PlainColor();
  for (int64_t y = 0; y < out_h; ++y) {
    for (int64_t x = 0; x < out_w; ++x) {
      bzna_tf::warp::WarpYuv420Pixel(luma.plane, cb.plane, cr.plane, m, color, layout, n, y, x, out.data(),
                                     antialias);
    }
  }
  bzna_tf::fuzz::CheckOutput(out, kBatch, n, image, 0.0f, 255.0f, true, "WarpYuv420Pixel");
  CheckRowPath<bzna_tf::warp::YuvRows>(
      out, color, layout, n, out_h, p.Byte() % (out_h + 1),
      [&](bzna_tf::warp::YuvRows* rows) {
        return rows->Prepare(luma.plane, cb.plane, cr.plane, m, antialias, out_w, out_h);
      },
      "YuvRows");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Params p(data, size);
  const uint8_t mode = p.Byte();
  const int w = p.Int(1, kMaxSide), h = p.Int(1, kMaxSide);
  const int out_w = p.Int(1, kMaxOutput), out_h = p.Int(1, kMaxOutput);
  const bzna_tf::warp::OutputLayout layout{out_h, out_w, (mode & 4) != 0};
  const bool antialias = (mode & 8) != 0;
  // The texels: the rest of the input after the warp's own parameters, read
  // cyclically (the parameters come first so that they stay put when the
  // fuzzer grows the input).
  Params q = p;
  for (int k = 0; k < kParamBytes; ++k) q.Byte();
  const std::vector<uint8_t> texels(q.rest(), q.rest() + q.left());
  switch (mode % 3) {
    case 0:
      WarpYuv(p, w, h, out_w, out_h, layout, antialias, texels);
      break;
    case 1:
      WarpRgb<uint8_t>(p, w, h, out_w, out_h, layout, antialias, texels);
      break;
    default:
      WarpRgb<float>(p, w, h, out_w, out_h, layout, antialias, texels);
      break;
  }
  return 0;
}
