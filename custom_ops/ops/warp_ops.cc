// Registrations of the fused warp ops: BznaWarpYuv420 (decoded 4:2:0 frames)
// and BznaWarpRgb (RGB images). The per-pixel math is in lib/warp.h and is
// specified in SPEC section 4.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/warp.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace bzna_tf {
namespace warp_ops {  // this file's own (the ops build may compile files together)
namespace {

using ::tensorflow::shape_inference::DimensionHandle;
using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

// A dimension of `size` elements, checking it when it is statically known.
absl::Status CheckDim(InferenceContext* c, ShapeHandle shape, int index,
                      int64_t size) {
  DimensionHandle unused;
  return c->WithValue(c->Dim(shape, index), size, &unused);
}

// (d + 1) / 2, the chroma size for luma size d, or unknown.
DimensionHandle HalfRoundedUp(InferenceContext* c, DimensionHandle d) {
  if (!c->ValueKnown(d)) return c->UnknownDim();
  return c->MakeDim((c->Value(d) + 1) / 2);
}

// Checks the inputs every warp op shares (matrices, output_shape, bias, norm,
// oob_color, consecutive from input `first`) and sets output 0 from `batch`,
// the constant value of output_shape when it is known, and data_format.
absl::Status SetWarpOutput(InferenceContext* c, DimensionHandle batch,
                           int first) {
  ShapeHandle matrices;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(first), 3, &matrices));
  TF_RETURN_IF_ERROR(CheckDim(c, matrices, 1, 3));
  TF_RETURN_IF_ERROR(CheckDim(c, matrices, 2, 3));
  // One matrix per sample, or a single one broadcast to the batch.
  DimensionHandle count = c->Dim(matrices, 0);
  if (c->ValueKnown(count) && c->Value(count) != 1) {
    TF_RETURN_IF_ERROR(c->Merge(batch, count, &batch));
  }

  ShapeHandle vector;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(first + 1), 1, &vector));
  TF_RETURN_IF_ERROR(CheckDim(c, vector, 0, 2));
  for (int i = first + 2; i < first + 5; ++i) {
    TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 1, &vector));
    TF_RETURN_IF_ERROR(CheckDim(c, vector, 0, 3));
  }

  // (height, width), each dimension known when output_shape is a constant.
  ShapeHandle size;
  TF_RETURN_IF_ERROR(c->MakeShapeFromShapeTensor(first + 1, &size));
  std::string data_format;
  TF_RETURN_IF_ERROR(c->GetAttr(warp::kDataFormatAttr, &data_format));
  DimensionHandle height = c->Dim(size, 0);
  DimensionHandle width = c->Dim(size, 1);
  if (data_format == warp::kChannelsFirst) {
    c->set_output(0, c->MakeShape({batch, 3, height, width}));
  } else {
    c->set_output(0, c->MakeShape({batch, height, width, 3}));
  }
  return absl::OkStatus();
}

absl::Status WarpYuv420Shape(InferenceContext* c) {
  ShapeHandle y, cb, cr;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 3, &y));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 3, &cb));
  TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 3, &cr));
  TF_RETURN_IF_ERROR(c->Merge(cb, cr, &cb));
  DimensionHandle batch, unused;
  TF_RETURN_IF_ERROR(c->Merge(c->Dim(y, 0), c->Dim(cb, 0), &batch));
  TF_RETURN_IF_ERROR(
      c->Merge(c->Dim(cb, 1), HalfRoundedUp(c, c->Dim(y, 1)), &unused));
  TF_RETURN_IF_ERROR(
      c->Merge(c->Dim(cb, 2), HalfRoundedUp(c, c->Dim(y, 2)), &unused));
  return SetWarpOutput(c, batch, 3);
}

absl::Status WarpRgbShape(InferenceContext* c) {
  ShapeHandle images;
  TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 4, &images));
  TF_RETURN_IF_ERROR(CheckDim(c, images, 3, 3));
  return SetWarpOutput(c, c->Dim(images, 0), 1);
}

// The arguments every warp op documents alike.
constexpr char kWarpArgsDoc[] = R"doc(matrices: [N, 3, 3] row-major output->source matrices, or [1, 3, 3] for all
  samples.
output_shape: [2] int32, the output (height, width), both positive.
bias: [3] subtracted from each RGB channel (0 to 255 units).
norm: [3] multiplies each channel after the bias.
oob_color: [3] written as is where the source point is out of bounds.
output: [N, height, width, 3] float32, or [N, 3, height, width] with NCHW.
data_format: layout of `output`.
antialias: where the matrix reduces (a column of the output->source map's
  Jacobian at the pixel longer than one texel), the pixel is the weighted mean
  of its footprint's texels instead of a point sample: with F the Jacobian
  (each column stretched to at least 1 and at most 16 texels) and d a texel's
  offset from (X, Y), the texel weighs max(0, 1 - |a|) max(0, 1 - |b|) for
  (a, b) = F^-1 d; texels outside the plane are left out. For resizes and
  crops that is Pillow's antialiased BILINEAR filter (tf.image.resize with
  antialias). Chroma's footprint is half the luma's. Out of bounds is still
  decided by (X, Y) alone. False (default): the point sampling above.
)doc";

std::string DataFormatAttr() {
  return absl::StrCat(warp::kDataFormatAttr, ": {'NHWC', 'NCHW'} = 'NHWC'");
}

std::string AntialiasAttr() { return absl::StrCat(warp::kAntialiasAttr, ": bool = false"); }

}  // namespace

REGISTER_OP("BznaWarpYuv420")
    .Input("y: uint8")
    .Input("cb: uint8")
    .Input("cr: uint8")
    .Input("matrices: float")
    .Input("output_shape: int32")
    .Input("bias: float")
    .Input("norm: float")
    .Input("oob_color: float")
    .Output("output: float")
    .Attr(DataFormatAttr())
    .Attr(AntialiasAttr())
    .SetShapeFn(WarpYuv420Shape)
    .Doc(absl::StrCat(R"doc(
Warps decoded full-range BT.601 YUV 4:2:0 frames into normalised RGB float32.

For every output pixel (x, y), integer indices with pixel centres on integers:
(X', Y', W') = M (x, y, 1) and (X, Y) = (X'/W', Y'/W'); M maps OUTPUT pixel
indices to SOURCE pixel indices. If X or Y is NaN, X < -0.5, X > W - 0.5,
Y < -0.5 or Y > H - 0.5 ((W, H) being the Y plane's coded size: the picture's
area, half a pixel beyond its outer pixel centres) the pixel is oob_color, raw.
Otherwise luma is sampled bilinearly at (X, Y) and chroma at
(X/2 - 0.25, Y/2 - 0.25), fetches clamped to each plane; then
R = Y + 1.402 (Cr-128), G = Y - 0.344136 (Cb-128) - 0.714136 (Cr-128),
B = Y + 1.772 (Cb-128), each rounded half away from zero and clamped to
[0, 255]; and out[c] = (rgb[c] - bias[c]) * norm[c]. For torchvision-style
mean/std in [0, 1] units, bias = 255 mean and norm = 1 / (255 std).

y: [N, H, W] luma planes.
cb: [N, (H+1)/2, (W+1)/2] blue-difference planes.
cr: [N, (H+1)/2, (W+1)/2] red-difference planes.
)doc", kWarpArgsDoc));

REGISTER_OP("BznaWarpRgb")
    .Input("images: T")
    .Input("matrices: float")
    .Input("output_shape: int32")
    .Input("bias: float")
    .Input("norm: float")
    .Input("oob_color: float")
    .Output("output: float")
    .Attr(absl::StrCat(warp::kTypeAttr, ": {uint8, float}"))
    .Attr(DataFormatAttr())
    .Attr(AntialiasAttr())
    .SetShapeFn(WarpRgbShape)
    .Doc(absl::StrCat(R"doc(
Warps RGB images into normalised RGB float32.

For every output pixel (x, y), integer indices with pixel centres on integers:
(X', Y', W') = M (x, y, 1) and (X, Y) = (X'/W', Y'/W'); M maps OUTPUT pixel
indices to SOURCE pixel indices. If X or Y is NaN, X < -0.5, X > W - 0.5,
Y < -0.5 or Y > H - 0.5 (outside the picture's area, half a pixel beyond its
outer pixel centres) the pixel is oob_color, raw. Otherwise each channel is sampled
bilinearly at (X, Y), fetches clamped to the image; uint8 images are then
rounded half away from zero and clamped to [0, 255] (float images are not);
and out[c] = (rgb[c] - bias[c]) * norm[c]. For torchvision-style mean/std in
[0, 1] units, bias = 255 mean and norm = 1 / (255 std).

images: [N, H, W, 3] uint8 or float32.
)doc", kWarpArgsDoc));

REGISTER_OP("BznaDecodeWarp")
    .Input("data: string")
    .Input("matrices: float")
    .Input("output_shape: int32")
    .Input("bias: float")
    .Input("norm: float")
    .Input("oob_color: float")
    .Input("names: string")
    .Input("picture_sizes: int32")
    .Output("output: float")
    .Output("errors: string")
    .Attr(DataFormatAttr())
    .Attr(AntialiasAttr())
    .Attr("on_error: {'raise', 'skip'} = 'raise'")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle data, names, sizes;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &data));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(6), 1, &names));
      DimensionHandle batch = c->Dim(data, 0);
      // [N, 2], or [0] for the decoded frames' sizes.
      TF_RETURN_IF_ERROR(c->WithRankAtLeast(c->input(7), 1, &sizes));
      TF_RETURN_IF_ERROR(c->WithRankAtMost(sizes, 2, &sizes));
      if (c->RankKnown(sizes) && c->Rank(sizes) == 1) {
        TF_RETURN_IF_ERROR(CheckDim(c, sizes, 0, 0));
      } else if (c->RankKnown(sizes)) {
        TF_RETURN_IF_ERROR(CheckDim(c, sizes, 1, 2));
        TF_RETURN_IF_ERROR(c->Merge(batch, c->Dim(sizes, 0), &batch));
      }
      c->set_output(1, c->Vector(batch));
      return SetWarpOutput(c, batch, 1);
    })
    .Doc(absl::StrCat(R"doc(
Decodes H.265 pictures with FFmpeg and warps them, in one pass per picture.

Each element of `data` is one Annex-B H.265 picture (BznaDataset's "data"),
decoded on the CPU by FFmpeg's HEVC decoder to 8-bit 4:2:0 and warped exactly
as BznaWarpYuv420 warps its planes (SPEC section 4: M maps OUTPUT pixel
indices to SOURCE pixel indices of the picture), the planes being the
picture's: its picture_sizes at the top-left of the decoded frame, else the
whole frame. Out of bounds is outside the picture (its picture_sizes, else
the decoded frame), and fetches clamp to the picture's last row and column,
never to the frame's padding beyond it. Samples are spread over the CPU worker
threads, one decoder per sample at a time; no plane is copied.

data: [N] string, one picture each.
names: [N] string naming each picture in error messages (e.g. "train.bzna,
  sample 17"), or [0] for "sample n of the batch".
picture_sizes: [N, 2] int32, each picture's (height, width) (BznaDataset's
  "height" and "width": the track's size, the frame's padding left out), or
  [0] for the decoded frames' own sizes. A size below 1 or larger than the
  decoded frame is an error about that picture, as a decoding failure is.
errors: [N] string, empty for pictures that decoded. With on_error = "raise"
  the first failure fails the op (its message starts with the picture's name)
  and errors is all empty; with "skip" a picture that fails to decode (or
  whose picture_sizes do not fit its frame) gets oob_color everywhere and its
  reason in errors.
)doc", kWarpArgsDoc));

REGISTER_OP("BznaDecodeYuv420")
    .Input("data: string")
    .Output("y: uint8")
    .Output("cb: uint8")
    .Output("cr: uint8")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 0, &unused));
      for (int i = 0; i < 3; ++i) c->set_output(i, c->Matrix(c->UnknownDim(), c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
Decodes one Annex-B H.265 picture with FFmpeg's HEVC decoder to its planes.

data: scalar string.
y: [H, W] luma of the coded frame.
cb: [(H+1)/2, (W+1)/2] blue-difference chroma.
cr: [(H+1)/2, (W+1)/2] red-difference chroma.
)doc");

}  // namespace warp_ops
}  // namespace bzna_tf
