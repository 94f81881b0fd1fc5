// Registration of BznaDecodeWarpDataset: as_dataset(device="gpu")'s last
// stage, decoding batches ahead of their use (kernels/decode_dataset.h).

#include <string>

#include "absl/strings/str_cat.h"
#include "lib/warp.h"
#include "tensorflow/core/common_runtime/input_colocation_exemption_registry.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace bzna_tf {

REGISTER_OP("BznaDecodeWarpDataset")
    .Input("input_dataset: variant")
    .Input("output_shape: int32")
    .Input("bias: float")
    .Input("norm: float")
    .Input("oob_color: float")
    .Output("handle: variant")
    .Attr(absl::StrCat(warp::kDataFormatAttr, ": {'NHWC', 'NCHW'} = 'NHWC'"))
    .Attr(absl::StrCat(warp::kAntialiasAttr, ": bool = false"))
    .Attr("on_error: {'raise', 'skip'} = 'raise'")
    .Attr("depth: int >= 1 = 2")
    .Attr("counter: string = ''")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
Decodes and warps the batches of another dataset, `depth` batches ahead.

Each input element is one batch of as_dataset's pipeline before decoding:
  data:          [N] string, H.265 pictures (BznaDecodeWarp's `data`);
  matrices:      [N, 3, 3] float, output->source matrices;
  picture_sizes: [N, 2] int32, each picture's (height, width);
  names:         [N] string, how errors name each sample;
  errors:        [N] string, reading's errors ("" where read);
then components passed through (labels, filenames), each with N rows. Each
output element is the batch's images (float32 [N, height, width, 3], or
[N, 3, height, width] with NCHW), decoded and warped as BznaDecodeWarp does,
then the pass-through components. The iterator keeps `depth` input batches
decoding in the background (on the device its kernel runs on: FFmpeg on the
CPU, NVDEC and the CUDA warp on a GPU) while earlier ones are used; the input
pipeline runs on the CPU of the iterator's task. On the CPU kernel its
checkpoints hold the batches in flight, so a restored iterator yields the same
sequence; an iterator placed on a GPU cannot be saved by TensorFlow
(SerializeIterator has CPU kernels only, tensorflow/tensorflow#62959): resume
at epoch boundaries with bzna_tf.callbacks.SyncEpochs instead, which needs no
iterator state.

on_error: "raise": a sample that fails (reading's error, else decoding's)
  fails the batch, named. "skip": such samples are dropped from their batch,
  each counted under `counter` (BznaReportSkips' counters) and logged.
)doc");

}  // namespace bzna_tf

// The GPU kernel reads its input dataset (a CPU pipeline) from host memory:
// the placer need not put it beside its input.
namespace tensorflow {
REGISTER_INPUT_COLOCATION_EXEMPTION("BznaDecodeWarpDataset");
}  // namespace tensorflow
