// Registrations of the ops that report the samples as_dataset(on_error="skip")
// drops: BznaReportSkips (warns and counts) and BznaSkipCounts (reads).

#include "absl/status/status.h"
#include "tensorflow/core/framework/op.h"
#include "tensorflow/core/framework/shape_inference.h"

namespace bzna_tf {

using ::tensorflow::shape_inference::InferenceContext;
using ::tensorflow::shape_inference::ShapeHandle;

REGISTER_OP("BznaReportSkips")
    .Input("errors: string")
    .Output("ok: bool")
    .Attr("counter: string")
    .SetIsStateful()  // it logs and counts: never folded, merged or pruned
    .SetShapeFn([](InferenceContext* c) {
      ShapeHandle errors;
      TF_RETURN_IF_ERROR(c->WithRank(c->input(0), 1, &errors));
      c->set_output(0, errors);
      return absl::OkStatus();
    })
    .Doc(R"doc(
Reports the samples a batch skips and says which to keep.

Each non-empty element of `errors` is one skipped sample's reason (it names
the file and the sample). It is added to the process-wide counter named
`counter` and logged as a warning: the first 10 of a counter one line each,
later ones at most one summary line every 30 seconds.

errors: [N] string, "" for a sample that is kept.
ok: [N] bool, true where errors is empty.
counter: the counter's name (as_dataset makes one per dataset).
)doc");

REGISTER_OP("BznaSkipCounts")
    .Output("count: int64")
    .Output("recent: string")
    .Attr("counter: string")
    .SetIsStateful()  // the counter changes while a pipeline runs
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, c->Scalar());
      c->set_output(1, c->Vector(c->UnknownDim()));
      return absl::OkStatus();
    })
    .Doc(R"doc(
The samples skipped so far under `counter` in this process.

count: how many.
recent: the reasons of the last ones (at most 100), oldest first.
)doc");

}  // namespace bzna_tf
