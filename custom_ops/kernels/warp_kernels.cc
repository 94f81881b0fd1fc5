// CPU kernels of BznaWarpYuv420 and BznaWarpRgb (registered in
// ops/warp_ops.cc). They validate the inputs and spread output rows over the
// CPU worker threads; the per-pixel math is lib/warp.h, run a row at a time
// (lib/warp_rows.h) where the matrix is axis-aligned.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>
#include <functional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/decode_warp_cpu.h"
#include "kernels/warp_common.h"
#include "lib/hevc_decoder.h"
#include "lib/warp.h"
#include "lib/warp_rows.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"
#include "tensorflow/core/framework/types.h"
#include "tensorflow/core/platform/threadpool.h"

namespace bzna_tf {
namespace warp_kernels {  // this file's own (the ops build may compile files together)
namespace {

using ::tensorflow::DEVICE_CPU;

// Approximate CPU cycles per output pixel, for ParallelFor's sharding: the 3x3
// transform and its divide (~20), three bilinear samples of four loads and ~10
// flops each (~75), colour conversion, rounding, normalisation and three
// scattered stores (~55). (The row path of axis-aligned matrices is several
// times cheaper; shards stay large enough either way.)
constexpr int64_t kCostPerPixel = 150;
// With antialias, at the 1.5-2x reductions of typical crops: the footprint's
// row and column weights and a 4 x 4 texel window for luma (lib/warp.h),
// about twice the point sample (benchmarks/antialias.py).
constexpr int64_t kCostPerPixelAntialias = 300;

// Runs fn(begin, end) over [0, total) on the CPU worker threads, in shards of
// at least `cost_per_unit` cycles per unit. This ParallelFor is in every
// TensorFlow bzna_tf supports (>= 2.16); 2.21 deprecates it in favour of
// SchedulingParams::Adaptive.
void ParallelFor(OpKernelContext* ctx, int64_t total, int64_t cost_per_unit,
                 const std::function<void(int64_t, int64_t)>& fn) {
  auto* workers = ctx->device()->tensorflow_cpu_worker_threads()->workers;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  workers->ParallelFor(total, cost_per_unit, fn);
#pragma GCC diagnostic pop
}

// Runs rows(n, first, end) over every sample n's output rows first..end - 1 on
// the CPU worker threads, each call a run of consecutive rows of one sample.
void ForEachOutputRows(OpKernelContext* ctx, int64_t batch, const WarpArgs& args,
                       const std::function<void(int64_t, int64_t, int64_t)>& rows) {
  const int64_t height = args.out_height;
  // One unit is one output row: out_width pixels at per_pixel cycles each.
  const int64_t per_pixel = args.antialias ? kCostPerPixelAntialias : kCostPerPixel;
  ParallelFor(ctx, batch * height, args.out_width * per_pixel,
              [&](int64_t begin, int64_t end) {
                while (begin < end) {
                  const int64_t n = begin / height;
                  const int64_t stop = std::min(end, (n + 1) * height);
                  rows(n, begin - n * height, stop - n * height);
                  begin = stop;
                }
              });
}

// Output rows first..end - 1 of sample n from 4:2:0 planes: a row at a time
// where the matrix allows, else pixel by pixel.
void WarpYuv420Rows(const warp::Plane<uint8_t>& luma, const warp::Plane<uint8_t>& cb,
                    const warp::Plane<uint8_t>& cr, const float* m, const WarpArgs& args,
                    const warp::OutputLayout& layout, int64_t n, int64_t first, int64_t end, float* out) {
  warp::YuvRows rows;
  if (rows.Prepare(luma, cb, cr, m, args.antialias, args.out_width, args.out_height)) {
    rows.Rows(args.color, layout, n, first, end, out);
    return;
  }
  for (int64_t y = first; y < end; ++y) {
    for (int64_t x = 0; x < args.out_width; ++x) {
      warp::WarpYuv420Pixel(luma, cb, cr, m, args.color, layout, n, y, x, out, args.antialias);
    }
  }
}

class WarpYuv420Op : public WarpYuv420OpBase {
 public:
  explicit WarpYuv420Op(OpKernelConstruction* ctx) : WarpYuv420OpBase(ctx) {}

 private:
  void Warp(OpKernelContext* ctx, const Tensor& y, const Tensor& cb, const Tensor& cr, const WarpArgs& args,
            Tensor* output) override {
    const int64_t batch = y.dim_size(0);
    const int64_t height = y.dim_size(1);
    const int64_t width = y.dim_size(2);
    const int64_t chroma_height = (height + 1) / 2;
    const int64_t chroma_width = (width + 1) / 2;
    const uint8_t* y_data = y.flat<uint8_t>().data();
    const uint8_t* cb_data = cb.flat<uint8_t>().data();
    const uint8_t* cr_data = cr.flat<uint8_t>().data();
    const int64_t luma_size = height * width;
    const int64_t chroma_size = chroma_height * chroma_width;
    const warp::OutputLayout layout = Layout(args);
    float* out = output->flat<float>().data();
    ForEachOutputRows(ctx, batch, args, [&](int64_t n, int64_t first, int64_t end) {
      const warp::Plane<uint8_t> luma = {y_data + n * luma_size,
                                         static_cast<int>(width),
                                         static_cast<int>(height), width, 1};
      const warp::Plane<uint8_t> blue = {
          cb_data + n * chroma_size, static_cast<int>(chroma_width),
          static_cast<int>(chroma_height), chroma_width, 1};
      const warp::Plane<uint8_t> red = {
          cr_data + n * chroma_size, static_cast<int>(chroma_width),
          static_cast<int>(chroma_height), chroma_width, 1};
      const float* m = args.Matrix(n);
      WarpYuv420Rows(luma, blue, red, m, args, layout, n, first, end, out);
    });
  }
};

template <typename T>
class WarpRgbOp : public WarpRgbOpBase {
 public:
  explicit WarpRgbOp(OpKernelConstruction* ctx) : WarpRgbOpBase(ctx) {}

 private:
  void Warp(OpKernelContext* ctx, const Tensor& images, const WarpArgs& args, Tensor* output) override {
    const int64_t batch = images.dim_size(0);
    const int64_t height = images.dim_size(1);
    const int64_t width = images.dim_size(2);
    const T* data = images.flat<T>().data();
    const int64_t image_size = height * width * 3;
    const warp::OutputLayout layout = Layout(args);
    float* out = output->flat<float>().data();
    ForEachOutputRows(ctx, batch, args, [&](int64_t n, int64_t first, int64_t end) {
      warp::Plane<T> channels[3];
      for (int c = 0; c < 3; ++c) {
        channels[c] = {data + n * image_size + c, static_cast<int>(width),
                       static_cast<int>(height), width * 3, 3};
      }
      const float* m = args.Matrix(n);
      warp::RgbRows<T> rows;
      if (rows.Prepare(channels, m, args.antialias, args.out_width, args.out_height)) {
        rows.Rows(args.color, layout, n, first, end, out);
        return;
      }
      for (int64_t y = first; y < end; ++y) {
        for (int64_t x = 0; x < args.out_width; ++x) {
          warp::WarpRgbPixel(channels, m, args.color, layout, n, y, x, out, args.antialias);
        }
      }
    });
  }
};

// Approximate CPU cycles to decode one picture: a 512x512 intra H.265 frame
// takes about 10 ms on one core. Each shard is then at least one sample.
constexpr int64_t kCostPerDecode = 20'000'000;

}  // namespace
}  // namespace warp_kernels

void FillOob(const WarpArgs& args, const warp::OutputLayout& layout, int64_t n, float* out) {
  for (int64_t row = 0; row < args.out_height; ++row) {
    for (int64_t x = 0; x < args.out_width; ++x) {
      for (int c = 0; c < 3; ++c) out[warp::OutputIndex(layout, n, row, x, c)] = args.color.oob[c];
    }
  }
}

void DecodeWarpPictures(const ParallelForFn& parallel_for, const Tensor& data, const PictureSizes& picture_sizes,
                        const WarpArgs& args, const warp::OutputLayout& layout, float* out,
                        std::vector<absl::Status>* status, const std::atomic<bool>* cancelled) {
  const int64_t batch = data.dim_size(0);
  const auto pictures = data.flat<tensorflow::tstring>();
  status->assign(batch, absl::OkStatus());
  auto one = [&](int64_t n) -> absl::Status {
    if (cancelled != nullptr && cancelled->load()) return absl::CancelledError("decoding was cancelled");
    DecodedPicture pic;
    TF_RETURN_IF_ERROR(DecodeHevc(pictures(n), &pic));
    TF_RETURN_IF_ERROR(CheckSide("a decoded frame height", pic.height()));
    TF_RETURN_IF_ERROR(CheckSide("a decoded frame width", pic.width()));
    // Checked once decoded: data that does not decode (an unread sample's
    // empty data included) fails as such, whatever its size says.
    int height = 0, width = 0;
    TF_RETURN_IF_ERROR(picture_sizes.Get(n, pic.height(), pic.width(), &height, &width));
    warp::Plane<uint8_t> p[3];
    PicturePlanes(pic, width, height, p);
    const float* m = args.Matrix(n);
    warp_kernels::WarpYuv420Rows(p[0], p[1], p[2], m, args, layout, n, 0, args.out_height, out);
    return absl::OkStatus();
  };
  parallel_for(batch, warp_kernels::kCostPerDecode, [&](int64_t begin, int64_t end) {
    for (int64_t n = begin; n < end; ++n) (*status)[n] = one(n);
  });
}

namespace warp_kernels {
namespace {

class DecodeWarpOp : public DecodeWarpOpBase {
 public:
  explicit DecodeWarpOp(OpKernelConstruction* ctx) : DecodeWarpOpBase(ctx) {}

 private:
  void DecodeWarp(OpKernelContext* ctx, const Tensor& data, const PictureSizes& picture_sizes,
                  const WarpArgs& args, DecodeErrors* errors, Tensor* output) override {
    const int64_t batch = data.dim_size(0);
    const warp::OutputLayout layout = Layout(args);
    float* out = output->flat<float>().data();
    std::vector<absl::Status> status;
    DecodeWarpPictures(
        [ctx](int64_t total, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
          ParallelFor(ctx, total, cost, fn);
        },
        data, picture_sizes, args, layout, out, &status, nullptr);
    for (int64_t n = 0; n < batch; ++n) {
      if (status[n].ok()) continue;
      OP_REQUIRES_OK(ctx, errors->Fail(n, status[n]));
      FillOob(args, layout, n, out);
    }
  }
};

class DecodeYuv420Op : public OpKernel {
 public:
  explicit DecodeYuv420Op(OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& data = ctx->input(0);
    OP_REQUIRES(ctx, data.dims() == 0,
                absl::InvalidArgumentError(absl::StrCat("expected one picture (a scalar string). Received shape ",
                                                        data.shape().DebugString())));
    DecodedPicture pic;
    OP_REQUIRES_OK(ctx, DecodeHevc(data.scalar<tensorflow::tstring>()(), &pic));
    warp::Plane<uint8_t> p[3];
    DecodedPlanes(pic, p);
    for (int i = 0; i < 3; ++i) {
      Tensor* plane = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(i, TensorShape({p[i].height, p[i].width}), &plane));
      uint8_t* dst = plane->flat<uint8_t>().data();
      for (int r = 0; r < p[i].height; ++r) {
        std::memcpy(dst + int64_t{r} * p[i].width, p[i].data + r * p[i].row_stride, p[i].width);
      }
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("BznaDecodeWarp").Device(DEVICE_CPU), DecodeWarpOp);
REGISTER_KERNEL_BUILDER(Name("BznaDecodeYuv420").Device(DEVICE_CPU), DecodeYuv420Op);
REGISTER_KERNEL_BUILDER(Name("BznaWarpYuv420").Device(DEVICE_CPU),
                        WarpYuv420Op);
REGISTER_KERNEL_BUILDER(Name("BznaWarpRgb")
                            .Device(DEVICE_CPU)
                            .TypeConstraint<uint8_t>(warp::kTypeAttr),
                        WarpRgbOp<uint8_t>);
REGISTER_KERNEL_BUILDER(Name("BznaWarpRgb")
                            .Device(DEVICE_CPU)
                            .TypeConstraint<float>(warp::kTypeAttr),
                        WarpRgbOp<float>);

}  // namespace
}  // namespace warp_kernels
}  // namespace bzna_tf
