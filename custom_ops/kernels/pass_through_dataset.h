// PassThroughDataset: a dataset whose elements are its input's, unchanged, and
// whose iterator's checkpoints (explicit and symbolic) hold state of its own
// besides its input's. The ops under as_dataset's prefetch are such datasets:
// BznaEpochCounterCheckpointDataset (epoch_positions_kernels.cc) and
// BznaCheckpointFactsDataset (checkpoint_facts_kernels.cc). Each says what it
// saves and how it restores (SaveState, RestoreState), and how it serialises.
//
// The input's iterator keeps the prefix it had without the op, so that
// checkpoints written before the op existed restore. An op that stands in for
// another one, whose place in the iterator tree it takes, gives that one's
// prefix suffix (`input_suffix`) and may state the cardinality itself.

#ifndef BZNA_TF_KERNELS_PASS_THROUGH_DATASET_H_
#define BZNA_TF_KERNELS_PASS_THROUGH_DATASET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace bzna_tf {

class PassThroughDataset : public tensorflow::data::DatasetBase {
 public:
  // `op`: the op's name (DebugString); `iterator`: its iterator's prefix
  // suffix, "::" included (the checkpoint keys: keep it when the op is renamed).
  // `cardinality`: kUnknownCardinality for the input's.
  PassThroughDataset(tensorflow::OpKernelContext* ctx, const DatasetBase* input, std::string op,
                     std::string iterator, std::string input_suffix = "",
                     int64_t cardinality = tensorflow::data::kUnknownCardinality)
      : DatasetBase(tensorflow::data::DatasetContext(ctx)),
        input_(input),
        cardinality_(cardinality),
        op_(std::move(op)),
        iterator_(std::move(iterator)),
        input_suffix_(std::move(input_suffix)) {
    input_->Ref();
  }
  ~PassThroughDataset() override { input_->Unref(); }

  std::unique_ptr<tensorflow::data::IteratorBase> MakeIteratorInternal(const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{this, absl::StrCat(prefix, iterator_)},
                                      absl::StrCat(prefix, input_suffix_));
  }
  const tensorflow::DataTypeVector& output_dtypes() const override { return input_->output_dtypes(); }
  const std::vector<tensorflow::PartialTensorShape>& output_shapes() const override {
    return input_->output_shapes();
  }
  std::string DebugString() const override { return absl::StrCat(op_, "Op::Dataset"); }
  int64_t CardinalityInternal(tensorflow::data::CardinalityOptions options) const override {
    return cardinality_ != tensorflow::data::kUnknownCardinality ? cardinality_ : input_->Cardinality(options);
  }
  absl::Status InputDatasets(std::vector<const DatasetBase*>* inputs) const override {
    inputs->push_back(input_);
    return absl::OkStatus();
  }

 protected:
  // Writes this op's state under `prefix` (after the input's).
  virtual absl::Status SaveState(tensorflow::data::IteratorStateWriter* writer,
                                 const std::string& prefix) const = 0;
  // Reads it back from `prefix`; `restore_input` restores the input's
  // iterator, and must be called once, before or after, as the op needs.
  virtual absl::Status RestoreState(tensorflow::data::IteratorStateReader* reader, const std::string& prefix,
                                    const std::function<absl::Status()>& restore_input) const = 0;

  const DatasetBase* const input_;
  const int64_t cardinality_;

 private:
  class Iterator : public tensorflow::data::DatasetIterator<PassThroughDataset> {
   public:
    Iterator(const Params& params, std::string input_prefix)
        : DatasetIterator<PassThroughDataset>(params), input_prefix_(std::move(input_prefix)) {}

    // Saved after each element, as its input.
    bool SymbolicCheckpointCompatible() const override { return true; }

    absl::Status Initialize(tensorflow::data::IteratorContext* ctx) override {
      return dataset()->input_->MakeIterator(ctx, this, input_prefix_, &input_impl_);
    }

    absl::Status GetNextInternal(tensorflow::data::IteratorContext* ctx, std::vector<tensorflow::Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      return input_impl_->GetNext(ctx, out_tensors, end_of_sequence);
    }

   protected:
    std::shared_ptr<tensorflow::data::model::Node> CreateNode(
        tensorflow::data::IteratorContext*, tensorflow::data::model::Node::Args args) const override {
      return tensorflow::data::model::MakeKnownRatioNode(std::move(args), /*ratio=*/1);
    }

    absl::Status SaveInternal(tensorflow::data::SerializationContext* ctx,
                              tensorflow::data::IteratorStateWriter* writer) override {
      TF_RETURN_IF_ERROR(SaveInput(ctx, writer, input_impl_));
      return dataset()->SaveState(writer, prefix());
    }

    absl::Status RestoreInternal(tensorflow::data::IteratorContext* ctx,
                                 tensorflow::data::IteratorStateReader* reader) override {
      return dataset()->RestoreState(reader, prefix(), [&] { return RestoreInput(ctx, reader, input_impl_); });
    }

   private:
    const std::string input_prefix_;
    std::unique_ptr<tensorflow::data::IteratorBase> input_impl_;
  };

  const std::string op_;
  const std::string iterator_;
  const std::string input_suffix_;
};

}  // namespace bzna_tf

#endif  // BZNA_TF_KERNELS_PASS_THROUGH_DATASET_H_
