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
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace bzna_tf {
namespace {

using ::tensorflow::DataTypeVector;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::Tensor;
using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::DatasetContext;
using ::tensorflow::data::DatasetIterator;
using ::tensorflow::data::IteratorContext;
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

class CheckpointFactsDataset : public DatasetBase {
 public:
  CheckpointFactsDataset(OpKernelContext* ctx, const DatasetBase* input, std::vector<std::string> facts)
      : DatasetBase(DatasetContext(ctx)), input_(input), facts_(std::move(facts)) {
    input_->Ref();
  }
  ~CheckpointFactsDataset() override { input_->Unref(); }

  std::unique_ptr<tensorflow::data::IteratorBase> MakeIteratorInternal(const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{this, absl::StrCat(prefix, "::", kOpName)}, prefix);
  }
  const DataTypeVector& output_dtypes() const override { return input_->output_dtypes(); }
  const std::vector<PartialTensorShape>& output_shapes() const override { return input_->output_shapes(); }
  std::string DebugString() const override { return absl::StrCat(kOpName, "Op::Dataset"); }
  int64_t CardinalityInternal(tensorflow::data::CardinalityOptions options) const override {
    return input_->Cardinality(options);
  }
  absl::Status InputDatasets(std::vector<const DatasetBase*>* inputs) const override {
    inputs->push_back(input_);
    return absl::OkStatus();
  }
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

 private:
  class Iterator : public DatasetIterator<CheckpointFactsDataset> {
   public:
    // The input's iterator keeps the prefix it had without this op, so that
    // checkpoints written before it existed restore.
    Iterator(const Params& params, std::string input_prefix)
        : DatasetIterator<CheckpointFactsDataset>(params), input_prefix_(std::move(input_prefix)) {}

    bool SymbolicCheckpointCompatible() const override { return true; }

    absl::Status Initialize(IteratorContext* ctx) override {
      return dataset()->input_->MakeIterator(ctx, this, input_prefix_, &input_impl_);
    }

    absl::Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      return input_impl_->GetNext(ctx, out_tensors, end_of_sequence);
    }

   protected:
    std::shared_ptr<tensorflow::data::model::Node> CreateNode(
        IteratorContext*, tensorflow::data::model::Node::Args args) const override {
      return tensorflow::data::model::MakeKnownRatioNode(std::move(args), /*ratio=*/1);
    }

    absl::Status SaveInternal(SerializationContext* ctx, IteratorStateWriter* writer) override {
      const auto& facts = dataset()->facts_;
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), "facts", static_cast<int64_t>(facts.size())));
      for (size_t i = 0; i < facts.size(); ++i) {
        TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), absl::StrCat("fact_", i), facts[i]));
      }
      return SaveInput(ctx, writer, input_impl_);
    }

    absl::Status RestoreInternal(IteratorContext* ctx, IteratorStateReader* reader) override {
      if (reader->Contains(prefix(), "facts")) {
        int64_t n = 0;
        TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), "facts", &n));
        if (n < 0 || n > kMaxFacts) {
          return absl::DataLossError(
              absl::StrCat("restoring a ", kOpName, " iterator: the checkpoint says it holds ", n, " facts"));
        }
        std::vector<std::string> saved(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
          tensorflow::tstring fact;
          TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), absl::StrCat("fact_", i), &fact));
          saved[static_cast<size_t>(i)] = std::string(fact);
        }
        TF_RETURN_IF_ERROR(dataset()->Compare(saved));
      }
      return RestoreInput(ctx, reader, input_impl_);
    }

   private:
    const std::string input_prefix_;
    std::unique_ptr<tensorflow::data::IteratorBase> input_impl_;
  };

  const DatasetBase* const input_;
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
}  // namespace bzna_tf
