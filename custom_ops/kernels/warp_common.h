// What the CPU kernels (kernels/warp_kernels.cc) and the GPU kernels
// (gpu/tf_warp_kernels.cc, gpu/tf_decode_kernels.cc) of the warp ops share:
// each op's Compute up to the device's work (input validation, the output's
// allocation and layout, DecodeWarp's errors). Header-only (inline), as both
// libraries compile it.

#ifndef BZNA_TF_KERNELS_WARP_COMMON_H_
#define BZNA_TF_KERNELS_WARP_COMMON_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/warp.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/framework/tensor_shape.h"

namespace bzna_tf {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::TensorShape;

// Largest image side: every pixel index must be exact in float32 (2^24).
constexpr int64_t kMaxSide = int64_t{1} << 24;

// What both ops read from the inputs that follow their images.
struct WarpArgs {
  const float* matrices = nullptr;  // [count, 3, 3]
  // count is 1: the same matrix for every sample.
  bool broadcast_matrix = false;
  int64_t out_height = 0;
  int64_t out_width = 0;
  warp::ColorTransform color;
  bool antialias = false;  // the op's attribute, set by WarpOpBase::PrepareWarp

  // Sample n's matrix (a device pointer where the matrices are on the GPU).
  const float* Matrix(int64_t n) const { return matrices + (broadcast_matrix ? 0 : 9 * n); }
};

inline absl::Status CheckSide(const char* what, int64_t size) {
  if (size > kMaxSide) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", what,
                                                   " of at most ", kMaxSide,
                                                   " pixels. Received ", size));
  }
  return absl::OkStatus();
}

inline absl::Status ReadChannelVector(const Tensor& t, const char* name,
                               float out[3]) {
  if (t.dims() != 1 || t.dim_size(0) != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", name,
        " of shape [3] (one value per RGB channel). Received shape ",
        t.shape().DebugString()));
  }
  const auto values = t.flat<float>();
  for (int c = 0; c < 3; ++c) out[c] = values(c);
  return absl::OkStatus();
}

// Validates matrices, output_shape, bias, norm and oob_color, the five
// consecutive inputs from `first`, for a batch of `batch` samples.
inline absl::Status ReadWarpArgs(OpKernelContext* ctx, int first, int64_t batch,
                          WarpArgs* args) {
  const Tensor& matrices = ctx->input(first);
  if (matrices.dims() != 3 || matrices.dim_size(1) != 3 ||
      matrices.dim_size(2) != 3 ||
      (matrices.dim_size(0) != batch && matrices.dim_size(0) != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected matrices of shape [N, 3, 3] or [1, 3, 3] with N = ", batch,
        " (the batch size). Received shape ", matrices.shape().DebugString()));
  }
  args->matrices = matrices.flat<float>().data();
  args->broadcast_matrix = matrices.dim_size(0) == 1;

  const Tensor& output_shape = ctx->input(first + 1);
  if (output_shape.dims() != 1 || output_shape.dim_size(0) != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected output_shape of shape [2], (height, width). Received shape ",
        output_shape.shape().DebugString()));
  }
  const auto size = output_shape.vec<int32_t>();
  if (size(0) <= 0 || size(1) <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected a positive output_shape (height, width). Received [", size(0),
        ", ", size(1), "]"));
  }
  args->out_height = size(0);
  args->out_width = size(1);
  TF_RETURN_IF_ERROR(CheckSide("an output height", args->out_height));
  TF_RETURN_IF_ERROR(CheckSide("an output width", args->out_width));

  TF_RETURN_IF_ERROR(
      ReadChannelVector(ctx->input(first + 2), "bias", args->color.bias));
  TF_RETURN_IF_ERROR(
      ReadChannelVector(ctx->input(first + 3), "norm", args->color.norm));
  TF_RETURN_IF_ERROR(
      ReadChannelVector(ctx->input(first + 4), "oob_color", args->color.oob));
  return absl::OkStatus();
}

// The three planes of a batch of 4:2:0 frames: y [N, H, W], cb and cr
// [N, (H+1)/2, (W+1)/2].
inline absl::Status CheckYuvPlanes(const Tensor& y, const Tensor& cb, const Tensor& cr) {
  if (y.dims() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected y of shape [N, H, W]. Received shape ", y.shape().DebugString()));
  }
  TF_RETURN_IF_ERROR(CheckSide("a y plane height", y.dim_size(1)));
  TF_RETURN_IF_ERROR(CheckSide("a y plane width", y.dim_size(2)));
  const int64_t batch = y.dim_size(0);
  // 4:2:0 chroma planes cover odd luma sizes with a last, half-used texel.
  const int64_t chroma_height = (y.dim_size(1) + 1) / 2;
  const int64_t chroma_width = (y.dim_size(2) + 1) / 2;
  for (const auto& [name, plane] : {std::make_pair("cb", &cb), std::make_pair("cr", &cr)}) {
    if (plane->dims() != 3 || plane->dim_size(0) != batch || plane->dim_size(1) != chroma_height ||
        plane->dim_size(2) != chroma_width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected ", name, " of shape [", batch, ", ", chroma_height, ", ", chroma_width,
          "], [N, (H+1)/2, (W+1)/2] for y of shape ", y.shape().DebugString(), ". Received shape ",
          plane->shape().DebugString()));
    }
  }
  return absl::OkStatus();
}

// RGB images [N, H, W, 3].
inline absl::Status CheckRgbImages(const Tensor& images) {
  if (images.dims() != 4 || images.dim_size(3) != 3) {
    return absl::InvalidArgumentError(absl::StrCat("expected images of shape [N, H, W, 3]. Received shape ",
                                                   images.shape().DebugString()));
  }
  TF_RETURN_IF_ERROR(CheckSide("an image height", images.dim_size(1)));
  return CheckSide("an image width", images.dim_size(2));
}

// Pictures to decode: a vector of strings.
inline absl::Status CheckPictures(const Tensor& data) {
  if (data.dims() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected data of shape [N] (one picture each). Received shape ", data.shape().DebugString()));
  }
  return absl::OkStatus();
}

// State shared by the warp kernels: the output layout and antialias
// attributes.
class WarpOpBase : public OpKernel {
 public:
  explicit WarpOpBase(OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string data_format;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(warp::kDataFormatAttr, &data_format));
    channels_first_ = data_format == warp::kChannelsFirst;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(warp::kAntialiasAttr, &antialias_));
  }

 protected:
  absl::Status AllocateWarpOutput(OpKernelContext* ctx, int64_t batch,
                                  const WarpArgs& args, Tensor** output) const {
    TensorShape shape;
    if (channels_first_) {
      TF_RETURN_IF_ERROR(TensorShape::BuildTensorShape(
          {batch, 3, args.out_height, args.out_width}, &shape));
    } else {
      TF_RETURN_IF_ERROR(TensorShape::BuildTensorShape(
          {batch, args.out_height, args.out_width, 3}, &shape));
    }
    return ctx->allocate_output(0, shape, output);
  }

  // Reads the inputs from `first` (matrices, output_shape, bias, norm,
  // oob_color) for `batch` samples and allocates the output. False when the
  // kernel has nothing left to do: an error was set, or the output is empty.
  bool PrepareWarp(OpKernelContext* ctx, int first, int64_t batch, WarpArgs* args, Tensor** output) const {
    absl::Status s = ReadWarpArgs(ctx, first, batch, args);
    args->antialias = antialias_;
    if (s.ok()) s = AllocateWarpOutput(ctx, batch, *args, output);
    if (!s.ok()) {
      ctx->SetStatus(s);
      return false;
    }
    return (*output)->NumElements() > 0;
  }

  warp::OutputLayout Layout(const WarpArgs& args) const {
    warp::OutputLayout layout;
    layout.height = args.out_height;
    layout.width = args.out_width;
    layout.channels_first = channels_first_;
    return layout;
  }

 private:
  bool channels_first_ = false;
  bool antialias_ = false;
};

// BznaWarpYuv420's kernels: Compute checks the planes, reads the warp's
// inputs and allocates the output, the same on every device; Warp, each
// device's, writes it.
class WarpYuv420OpBase : public WarpOpBase {
 public:
  explicit WarpYuv420OpBase(OpKernelConstruction* ctx) : WarpOpBase(ctx) {}

  void Compute(OpKernelContext* ctx) final {
    const Tensor& y = ctx->input(0);
    const Tensor& cb = ctx->input(1);
    const Tensor& cr = ctx->input(2);
    OP_REQUIRES_OK(ctx, CheckYuvPlanes(y, cb, cr));
    WarpArgs args;
    Tensor* output = nullptr;
    if (!PrepareWarp(ctx, 3, y.dim_size(0), &args, &output)) return;
    Warp(ctx, y, cb, cr, args, output);
  }

 protected:
  // Warps the planes (checked by CheckYuvPlanes) into `output` (allocated,
  // not empty); errors go to ctx.
  virtual void Warp(OpKernelContext* ctx, const Tensor& y, const Tensor& cb, const Tensor& cr,
                    const WarpArgs& args, Tensor* output) = 0;
};

// BznaWarpRgb's kernels, as WarpYuv420OpBase: the checks here, the warp the
// device's.
class WarpRgbOpBase : public WarpOpBase {
 public:
  explicit WarpRgbOpBase(OpKernelConstruction* ctx) : WarpOpBase(ctx) {}

  void Compute(OpKernelContext* ctx) final {
    const Tensor& images = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckRgbImages(images));
    WarpArgs args;
    Tensor* output = nullptr;
    if (!PrepareWarp(ctx, 1, images.dim_size(0), &args, &output)) return;
    Warp(ctx, images, args, output);
  }

 protected:
  // Warps `images` (checked by CheckRgbImages) into `output` (allocated, not
  // empty); errors go to ctx.
  virtual void Warp(OpKernelContext* ctx, const Tensor& images, const WarpArgs& args, Tensor* output) = 0;
};

// BznaDecodeWarp's error handling, shared by its CPU and GPU kernels: the
// `names` input (6) that error messages start with, the `on_error` attr, and
// the `errors` output (1), one string per picture, empty when it decoded.
class DecodeErrors {
 public:
  static constexpr int kNamesInput = 6;
  static constexpr int kErrorsOutput = 1;

  explicit DecodeErrors(OpKernelConstruction* ctx) {
    std::string on_error;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("on_error", &on_error));
    skip_ = on_error == "skip";
  }

  bool skip() const { return skip_; }

  // Checks `names` ([0] or [batch]) and allocates `errors`, all empty.
  absl::Status Prepare(OpKernelContext* ctx, int64_t batch) {
    names_ = &ctx->input(kNamesInput);
    if (names_->dims() != 1 || (names_->dim_size(0) != 0 && names_->dim_size(0) != batch)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected `names` of shape [0] or [", batch, "] (one per picture). Received shape ",
          names_->shape().DebugString()));
    }
    TF_RETURN_IF_ERROR(ctx->allocate_output(kErrorsOutput, TensorShape({batch}), &errors_));
    return absl::OkStatus();
  }

  // How messages name picture n: names[n], or its position in the batch.
  std::string Name(int64_t n) const {
    if (names_ != nullptr && names_->dim_size(0) > 0) {
      return std::string(names_->flat<tensorflow::tstring>()(n));
    }
    return absl::StrCat("sample ", n, " of the batch");
  }

  // Errors about the picture's data: what on_error = "skip" skips. The rest
  // (no usable decoder, out of memory, a failed CUDA call) always fail the op.
  static bool Skippable(const absl::Status& s) {
    return s.code() == absl::StatusCode::kInvalidArgument || s.code() == absl::StatusCode::kDataLoss;
  }

  // Picture n failed with `s`: with "skip" (and a skippable error) records
  // the reason and returns OK (the caller fills the picture with oob_color);
  // otherwise returns the error the op fails with, named.
  absl::Status Fail(int64_t n, const absl::Status& s) {
    std::string named = absl::StrCat(Name(n), ": ", s.message());
    if (skip_ && Skippable(s)) {
      errors_->flat<tensorflow::tstring>()(n) = std::move(named);
      return absl::OkStatus();
    }
    return absl::Status(s.code(), named);
  }

 private:
  bool skip_ = false;
  const Tensor* names_ = nullptr;
  Tensor* errors_ = nullptr;
};

// BznaDecodeWarp's `picture_sizes` input (7), shared by its CPU and GPU
// kernels: each picture's (height, width) at the top-left of its decoded frame
// ([N, 2]), or [0] for the frames' own sizes. The warp's planes are the
// picture's: beyond it is out of bounds, and fetches clamp to its last row and
// column, not to the frame's padding.
class PictureSizes {
 public:
  static constexpr int kInput = 7;

  // Checks the input's shape for a batch of `batch` pictures.
  absl::Status Prepare(OpKernelContext* ctx, int64_t batch) {
    const Tensor& t = ctx->input(kInput);
    const bool frames = t.dims() == 1 && t.dim_size(0) == 0;
    if (!frames && (t.dims() != 2 || t.dim_size(0) != batch || t.dim_size(1) != 2)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected `picture_sizes` of shape [", batch, ", 2] ((height, width) per picture) or [0] (the "
          "decoded frames' sizes). Received shape ", t.shape().DebugString()));
    }
    sizes_ = frames ? nullptr : t.flat<int32_t>().data();
    return absl::OkStatus();
  }

  // [N, 2] row-major (height, width), or null for the frames' sizes.
  const int32_t* data() const { return sizes_; }

  // The sizes as given elsewhere than the op's input (BznaDecodeWarpDataset's batches).
  void Set(const int32_t* sizes) { sizes_ = sizes; }

  // Picture n's (height, width) within a decoded frame of frame_height x
  // frame_width: an InvalidArgument error (about picture n's data: the op's
  // on_error applies) unless 1 <= height <= frame_height and 1 <= width <=
  // frame_width.
  absl::Status Get(int64_t n, int frame_height, int frame_width, int* height, int* width) const {
    if (sizes_ == nullptr) {
      *height = frame_height;
      *width = frame_width;
      return absl::OkStatus();
    }
    const int32_t h = sizes_[2 * n], w = sizes_[2 * n + 1];
    if (h < 1 || w < 1 || h > frame_height || w > frame_width) {
      return absl::InvalidArgumentError(absl::StrCat(
          "expected a picture size (height, width) of at least [1, 1] and at most the decoded frame's [",
          frame_height, ", ", frame_width, "]. Received [", h, ", ", w, "]"));
    }
    *height = h;
    *width = w;
    return absl::OkStatus();
  }

 private:
  const int32_t* sizes_ = nullptr;
};

// BznaDecodeWarp's kernels, as WarpYuv420OpBase: the checks of the pictures,
// `names` and `picture_sizes` here, decoding and warping the device's.
class DecodeWarpOpBase : public WarpOpBase {
 public:
  explicit DecodeWarpOpBase(OpKernelConstruction* ctx) : WarpOpBase(ctx), errors_(ctx) {}

  void Compute(OpKernelContext* ctx) final {
    const Tensor& data = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckPictures(data));
    const int64_t batch = data.dim_size(0);
    DecodeErrors errors = errors_;
    OP_REQUIRES_OK(ctx, errors.Prepare(ctx, batch));
    PictureSizes picture_sizes;
    OP_REQUIRES_OK(ctx, picture_sizes.Prepare(ctx, batch));
    WarpArgs args;
    Tensor* output = nullptr;
    if (!PrepareWarp(ctx, 1, batch, &args, &output)) return;
    DecodeWarp(ctx, data, picture_sizes, args, &errors, output);
  }

 protected:
  // Decodes the pictures of `data` (checked by CheckPictures) and warps them
  // into `output` (allocated, not empty), each failed one through `errors`
  // (its `errors` output allocated); other errors go to ctx.
  virtual void DecodeWarp(OpKernelContext* ctx, const Tensor& data, const PictureSizes& picture_sizes,
                          const WarpArgs& args, DecodeErrors* errors, Tensor* output) = 0;

 private:
  DecodeErrors errors_;  // the attr; Compute works on a copy (kernels run concurrently)
};

}  // namespace bzna_tf

#endif  // BZNA_TF_KERNELS_WARP_COMMON_H_
