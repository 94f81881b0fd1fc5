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
    .Attr(absl::StrCat(kIdentitiesAttr, ": list(int) = []"))
    .Attr(absl::StrCat(kWorkingDirectoryAttr, ": string = ''"))
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
  filename: string, the stored basename, UTF-8 (only with with_filename=true;
            empty if the file has no bzna_fname track; a name that is not
            UTF-8 is a DataLossError, as in the Python reader).
  height:   int32, the picture's height from its track's tkhd.
  index:    int64, the global sample index (the element of `indices`).
  target:   int64, the target, or -1 for an unlabelled sample.
  width:    int32, the picture's width from its track's tkhd.

The decoded frame is at least width x height (padded right and bottom: to
multiples of 512 in the benzina layout, of 64 and at least 144 in the compact
one). Files are read through TensorFlow's filesystem
layer; each sample costs two positioned reads (the per-image mp4's header,
then the picture through the end of its moov). Malformed files raise
DataLossError naming the file, sample, box and byte offset.

filenames: scalar or vector of .bzna paths.
indices: vector of global sample indices, each in [0, total samples).
track: 'thumb' (the bzna_thumb picture, at most 512x512; the input when the
  image needs no thumbnail) or 'input' (the full-size picture).
with_filename: whether to add the filename component.
identities: empty (no check), or five int64 per file describing the file the
  caller's index was read from (bzna_tf.format.BznaFile.identity): its size,
  its modification time in ns (stat(2)'s for a local path, the filesystem's
  for a URL), and the moov, targets and names checksums of its checksum
  table (-1 each without one). The dataset refuses a file that is not that
  one with FailedPrecondition "<file>: the file changed since the dataset was
  opened (converted again or replaced: ...)": another size, other index
  checksums, or, without a checksum table, another modification time. Each
  iterator also refuses a file that changed (size, modification time, or
  another file renamed over it) since the dataset opened it, and a sample
  that fails to read from a file changed since (truncated, or rewritten in
  place) fails with that FailedPrecondition, not as a damaged sample.
working_directory: the directory relative local filenames are opened from
  (the working directory when the dataset was made, so that a later chdir
  does not lead to other files); errors name the files as given. Empty
  (graphs saved before it): the process's working directory when the files
  are opened.
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

REGISTER_OP("BznaEpochPositions")
    .Input("counter: resource")
    .Input("per_epoch: int64")
    .Input("stride: int64")
    .Input("batch_size: int64")
    .Input("endless_stop: int64")
    .Output("handle: variant")
    .SetIsStateful()
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      for (int i = 1; i < 5; ++i) TF_RETURN_IF_ERROR(c->WithRank(c->input(i), 0, &unused));
      return tensorflow::shape_inference::ScalarShape(c);
    })
    .Doc(R"doc(
The stream positions of one iteration of an as_dataset pipeline built with
initial_epoch=None: a dataset of int64 scalars.

When its iterator's first element is asked for, it reads the counter, an
int64 variable [iteration, skip], and sets it to [iteration + 1, 0] in the
same step. The iteration's positions are then first, first + 1, ..., stop - 1:
first = iteration * stride * per_epoch (+ skip * batch_size when endless),
stop = first + stride * per_epoch, or endless_stop when that is > 0. The
iterator's state is its place in that range: checkpoints (explicit and
symbolic) restore it without reading the counter again (as_dataset puts
BznaEpochCounterCheckpointDataset above it, whose state is the counter).

counter: the [iteration, skip] variable (ds.bzna_epochs).
per_epoch: positions per data epoch.
stride: data epochs per iteration.
batch_size: positions per batch (skip counts batches).
endless_stop: > 0: each iteration is endless, up to this position.
)doc");

REGISTER_OP("BznaHomeCheck")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: type")
    .Attr("container: string")
    .Attr("shared_name: string")
    .Attr("message: string")
    // Not stateful: it reads no state that changes, and TensorFlow's op
    // determinism (tf.data's make_deterministic rewrite) serialises every
    // parallel map and disables every prefetch of a pipeline that has a
    // stateful op in a function. Its input, the element, keeps it from being
    // folded, and its output is the element.
    .SetShapeFn(tensorflow::shape_inference::UnchangedShape)
    .Doc(R"doc(
Passes x through where this process holds the initialized int64 variable
`container`/`shared_name` on the device the op runs on; else fails with
`message` (InvalidArgument).

as_dataset's pipelines with an epoch counter check with it that they run in
the process that built them (a tf.data service worker holds no marker).
)doc");

REGISTER_OP("BznaEpochCounterCheckpointDataset")
    .Input("input_dataset: variant")
    .Input("counter: resource")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("cardinality: int = -2")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
The top of an as_dataset pipeline built with initial_epoch=None: the elements
of input_dataset, unchanged. Its iterator's checkpoints (explicit and symbolic:
after each element) hold the epoch counter's [iteration, skip] as well; a
restore sets the counter to it, unless the counter is there or further already
(in [iteration, skip] order) or holds no int64 pair. So the iterator alone
resumes the iterations after the restored one as an uninterrupted run has them.
input_dataset's iterator keeps the checkpoint keys it has without this op.

input_dataset: the pipeline.
counter: the [iteration, skip] variable (ds.bzna_epochs) that the pipeline's
  BznaEpochPositions reads.
cardinality: -2 (the default): input_dataset's. Else the dataset's, stated
  (not asserted) in place of an AssertCardinalityDataset that stood under this
  op, whose checkpoint keys input_dataset's iterator then keeps.
)doc");

// The former name of BznaEpochCounterCheckpointDataset: graphs and SavedModels
// written before the rename still load (as_dataset builds the new one).
REGISTER_OP("BznaEpochCounterCheckpoint")
    .Input("input_dataset: variant")
    .Input("counter: resource")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .Attr("cardinality: int = -2")
    .SetIsStateful()
    .SetShapeFn(tensorflow::shape_inference::ScalarShape)
    .Doc(R"doc(
BznaEpochCounterCheckpointDataset under its former name, for graphs written
before the rename.
)doc");

REGISTER_OP("BznaCheckpointFactsDataset")
    .Input("input_dataset: variant")
    .Input("facts: string")
    .Output("handle: variant")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
      return tensorflow::shape_inference::ScalarShape(c);
    })
    .Doc(R"doc(
The elements of input_dataset, unchanged; its iterator's checkpoints (explicit
and symbolic) hold `facts` as well, and a restore compares them with the
restoring dataset's before anything below it is restored: where a fact differs
(a checkpoint saved from a pipeline over other data, another selection, shard,
order or batch size), the restore fails with FailedPrecondition naming each
difference, since the saved positions would read other samples. A checkpoint
without facts (written before this op) restores unchecked. as_dataset puts it
under its prefetch. input_dataset's iterator keeps the checkpoint keys it has
without this op.

input_dataset: the pipeline.
facts: what the checkpoint must agree on, each "name: value" (names unique).
)doc");

REGISTER_OP("BznaEpochSchedule")
    .Input("positions: int64")
    .Input("selection: int64")
    .Input("seed: int64")
    .Output("indices: int64")
    .Output("epochs: int64")
    .Attr("shuffle: bool = false")
    .Attr("shard_count: int >= 1 = 1")
    .Attr("shard_index: int >= 0 = 0")
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle positions, unused;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &positions));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(2), 0, &unused));
      c->set_output(0, positions);
      c->set_output(1, positions);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Which sample each position of an endless stream of epochs reads.

The stream is the concatenation of epochs 0, 1, 2, ... of this shard: epoch e
holds the selection's positions shard_index, shard_index + shard_count, ...
(per_epoch of them) of that epoch's order, so position p is epoch
p / per_epoch, entry p % per_epoch. With shuffle, epoch e's order is a
uniform random permutation of the whole selection drawn from (seed, e)
(Fisher-Yates on a counter-based generator: the same on every machine and in
every process), so the shards of one epoch are disjoint and cover it. A pure
function of its inputs: tf.data service workers and restarted processes agree.

positions: vector of stream positions (>= 0).
selection: the global sample indices of one epoch, in unshuffled order.
seed: the permutations' seed.
indices: selection[order_e[entry * shard_count + shard_index]] per position.
epochs: the epoch of each position.
)doc");

REGISTER_OP("BznaReadSamples")
    .Input("filenames: string")
    .Input("indices: int64")
    .Output("data: string")
    .Output("filename: string")
    .Output("height: int32")
    .Output("target: int64")
    .Output("width: int32")
    .Output("errors: string")
    .Attr(absl::StrCat(kTrackAttr, ": {'thumb', 'input'} = 'thumb'"))
    .Attr(absl::StrCat(kWithFilenameAttr, ": bool = false"))
    .Attr("on_error: {'raise', 'skip'} = 'raise'")
    .Attr(absl::StrCat(kIdentitiesAttr, ": list(int) = []"))
    .Attr(absl::StrCat(kWorkingDirectoryAttr, ": string = ''"))
    // Not stateful (like ReadFile): iterators of pipelines that use it can be
    // checkpointed. Its inputs are never constants in as_dataset's pipeline.
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle indices, unused;
      TF_RETURN_IF_ERROR(c->WithRankAtMost(c->input(0), 1, &unused));
      TF_RETURN_IF_ERROR(c->WithRank(c->input(1), 1, &indices));
      bool with_filename = false;
      TF_RETURN_IF_ERROR(c->GetAttr(kWithFilenameAttr, &with_filename));
      for (int k = 0; k < 6; ++k) c->set_output(k, indices);
      if (!with_filename) c->set_output(1, c->Vector(0));
      return absl::OkStatus();
    })
    .Doc(R"doc(
The pictures of some samples of one or more .bzna files, as BznaDataset gives
them (see there), for a vector of global sample indices: the batched read of
as_dataset's pipeline. The files' indices are parsed once per process and
shared with BznaDataset. Errors name the file and the sample.

filename: the stored basenames, or an empty vector without with_filename.
errors: one string per sample, empty when it was read. With on_error =
  "raise" (default) the first sample that cannot be read fails the op and
  errors is all empty; with "skip" a sample that cannot be read (malformed,
  damaged, a short or failed read) gets an empty picture, sizes 0 and its
  reason ("<file>, sample <i>: ...") here. Files that cannot be opened or
  indexed, a file that changed since the kernel opened it (truncated or
  rewritten in place: looked at when a sample fails to read), and indices out
  of range, fail the op either way.
identities: as BznaDataset's: a file that is not the one its identity
  describes fails the op (FailedPrecondition) when the kernel opens its
  files, on_error = "skip" or not.
working_directory: as BznaDataset's.
)doc");

}  // namespace bzna_tf
