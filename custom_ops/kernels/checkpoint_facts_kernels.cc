// BznaCheckpointFactsDataset: under the prefetch of an as_dataset pipeline
// (bzna_tf/datasets/pipeline.py), its input's elements as they are. Its
// iterator's checkpoints hold the pipeline's facts ("files: ...", "shard: ...",
// each "name: value"), and a restore compares them with the restoring
// pipeline's before its input is restored.
//
// Why: the iterators below save stream positions. Restored into a pipeline
// over files converted again, another selection, shard, seed or batch size,
// the same positions name other samples, and the epoch goes on reading some
// samples twice and others never, without an error (or with TensorFlow's bare
// cardinality error at its end).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/pass_through_dataset.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace bzna_tf {
namespace checkpoint_facts_kernels {  // this file's own (the ops build may compile files together)
namespace {

using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::IteratorStateReader;
using ::tensorflow::data::IteratorStateWriter;
using ::tensorflow::data::SerializationContext;

// The name ends in "Dataset": tf.distribute's auto-sharding (a ShardDataset
// added under the pipeline's prefetch, after this op) adds its shard only after
// ops so named, and failed with "Unable to shard this input" otherwise.
constexpr char kOpName[] = "BznaCheckpointFactsDataset";
constexpr int64_t kMaxFacts = 64;  // a saved count above it is damage, not facts

// "name: value" -> (name, value); a fact without ": " is all name.
std::pair<std::string, std::string> SplitFact(const std::string& fact) {
  const size_t at = fact.find(": ");
  if (at == std::string::npos) return {fact, ""};
  return {fact.substr(0, at), fact.substr(at + 2)};
}

class CheckpointFactsDataset : public PassThroughDataset {
 public:
  CheckpointFactsDataset(OpKernelContext* ctx, const DatasetBase* input, std::vector<std::string> facts)
      : PassThroughDataset(ctx, input, kOpName, absl::StrCat("::", kOpName)), facts_(std::move(facts)) {}

  absl::Status CheckExternalState() const override { return input_->CheckExternalState(); }

  // OK where the saved facts agree with this dataset's; else FailedPrecondition
  // naming each difference. Only the facts of a name both have are compared: a
  // checkpoint written by a version that saved fewer (or other) facts restores
  // as far as they go, as one without any restores unchecked.
  absl::Status Compare(const std::vector<std::string>& saved) const {
    std::map<std::string, std::string> then;
    for (const auto& f : saved) then.insert(SplitFact(f));
    std::vector<std::string> differ;
    for (const auto& f : facts_) {
      const auto [name, value] = SplitFact(f);
      const auto it = then.find(name);
      if (it != then.end() && it->second != value) {
        differ.push_back(absl::StrCat(name, ": then ", it->second, ", now ", value));
      }
    }
    if (differ.empty()) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "bzna_tf: this iterator checkpoint was saved from another pipeline than the one restoring it (",
        absl::StrJoin(differ, "; "),
        "). Its saved positions would read other samples here: some twice in the epoch and others never. "
        "Restore it into a pipeline built as the one that saved it (the same files, not converted again, "
        "and the same selection, shard, seed, shuffle and batch size), or start from an epoch boundary "
        "instead (as_dataset(initial_epoch=...), or bzna_tf.callbacks.SyncEpochs)"));
  }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                                  tensorflow::Node** output) const override {
    tensorflow::Node *input = nullptr, *facts = nullptr;
    TF_RETURN_IF_ERROR(b->AddInputDataset(ctx, input_, &input));
    TF_RETURN_IF_ERROR(b->AddVector(facts_, &facts));
    return b->AddDataset(this, {input, facts}, output);
  }

  absl::Status SaveState(IteratorStateWriter* writer, const std::string& prefix) const override {
    TF_RETURN_IF_ERROR(writer->WriteScalar(prefix, "facts", static_cast<int64_t>(facts_.size())));
    for (size_t i = 0; i < facts_.size(); ++i) {
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix, absl::StrCat("fact_", i), facts_[i]));
    }
    return absl::OkStatus();
  }

  // Compared before the input is restored: its restore could fail less clearly, or not at all.
  absl::Status RestoreState(IteratorStateReader* reader, const std::string& prefix,
                            const std::function<absl::Status()>& restore_input) const override {
    if (reader->Contains(prefix, "facts")) {
      int64_t n = 0;
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix, "facts", &n));
      if (n < 0 || n > kMaxFacts) {
        return absl::DataLossError(
            absl::StrCat("restoring a ", kOpName, " iterator: the checkpoint says it holds ", n, " facts"));
      }
      std::vector<std::string> saved(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        tensorflow::tstring fact;
        TF_RETURN_IF_ERROR(reader->ReadScalar(prefix, absl::StrCat("fact_", i), &fact));
        saved[static_cast<size_t>(i)] = std::string(fact);
      }
      TF_RETURN_IF_ERROR(Compare(saved));
    }
    return restore_input();
  }

 private:
  const std::vector<std::string> facts_;
};

class CheckpointFactsOp : public tensorflow::data::UnaryDatasetOpKernel {
 public:
  explicit CheckpointFactsOp(OpKernelConstruction* ctx) : UnaryDatasetOpKernel(ctx) {}

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase* input, DatasetBase** output) override {
    const Tensor& facts = ctx->input(1);
    OP_REQUIRES(ctx, facts.dims() == 1 && facts.NumElements() <= kMaxFacts,
                absl::InvalidArgumentError(absl::StrCat("expected facts as a vector of at most ", kMaxFacts,
                                                        " strings. Received shape ",
                                                        facts.shape().DebugString())));
    std::vector<std::string> out;
    for (int64_t i = 0; i < facts.NumElements(); ++i) out.emplace_back(facts.flat<tensorflow::tstring>()(i));
    *output = new CheckpointFactsDataset(ctx, input, std::move(out));
  }
};

REGISTER_KERNEL_BUILDER(Name(kOpName).Device(tensorflow::DEVICE_CPU), CheckpointFactsOp);

}  // namespace
}  // namespace checkpoint_facts_kernels
}  // namespace bzna_tf
