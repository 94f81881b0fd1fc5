// Registration of the .bzna source ops.

#include "ops/dataset_ops.h"

#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/common_shape_fns.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace bzna_tf {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("BznaDataset")
    .Input("filenames: string")
    .Input("indices: int64")
    .Output("handle: variant")
    .Attr(absl::StrCat(kTrackAttr, ": {'thumb', 'input'} = 'thumb'"))
    .Attr(absl::StrCat(kWithFilenameAttr, ": bool = false"))
    // Source dataset ops are stateful so that constant folding leaves them be.
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(0), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
      return tensorflow::shape_inference::ScalarShape(c);
    })
    .Doc(R"doc(
A dataset of the pictures of one or more .bzna files, in the order `indices` gives.

The files are concatenated: global sample k of the second file is k plus the
number of samples of the first, and so on. Each element is one sample, as the
scalar components below, in this order (sorted by name, as tf.nest flattens
the dict the Python wrapper shows):

  data:     string, the picture as H.265 Annex-B (start code + VPS, SPS, PPS
            from the sample's own hvcC, then every NAL unit of the sample).
  filename: string, the stored basename (only with with_filename=true; empty
            if the file has no bzna_fname track).
  height:   int32, the picture's height from its track's tkhd.
  index:    int64, the global sample index (the element of `indices`).
  target:   int64, the target, or -1 for an unlabelled sample.
  width:    int32, the picture's width from its track's tkhd.

The decoded frame is larger than width x height (coded sizes are multiples of
512, padding right and bottom). Files are read through TensorFlow's filesystem
layer; each sample costs two positioned reads (the per-image mp4's header,
then the picture through the end of its moov). Malformed files raise
DataLossError naming the file, sample, box and byte offset.

filenames: scalar or vector of .bzna paths.
indices: vector of global sample indices, each in [0, total samples).
track: 'thumb' (the bzna_thumb picture, at most 512x512; the input when the
  image needs no thumbnail) or 'input' (the full-size picture).
with_filename: whether to add the filename component.
)doc");

REGISTER_OP("BznaNumSamples")
    .Input("filenames: string")
    .Output("num_samples: int64")
    .Output("num_labelled: int64")
    .SetIsStateful()  // the files may change between runs
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle files;
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(0), 1, &files));
      ShapeHandle out = c->Rank(files) == 0 ? c->Vector(1) : files;
      c->set_output(0, out);
      c->set_output(1, out);
      return absl::OkStatus();
    })
    .Doc(R"doc(
The number of samples and of labelled samples of each .bzna file (reads each
file's index once per process; BznaDataset shares it).

filenames: scalar or vector of .bzna paths.
num_samples: one count per file.
num_labelled: how many of them have a target (they come first).
)doc");

}  // namespace bzna_tf
