// BznaEpochPositions: the root of an as_dataset pipeline built with
// initial_epoch=None (bzna_tf/datasets/epochs.py): each iteration's stream
// positions, from an int64 [iteration, skip] counter variable.
//
// An iterator reads the counter when its first element is asked for and
// advances it (iteration + 1, skip 0) in the same step, under the variable's
// lock; from then on its range of positions lives in the iterator's own state
// (a cursor), which checkpoints, explicitly and symbolically, and restores
// without reading the counter again. (A map over the variable re-read it on a
// symbolic restore, and restored iterators then yielded other epochs.)
//
// BznaEpochCounterCheckpointDataset: above the root in such a pipeline (under its
// prefetch, which keeps its input to the end), its input's elements as they
// are; its iterator's state is the counter's value, so that a checkpoint of
// the pipeline's iterator alone carries it. A restore moves the counter there
// unless it is there or further already: the iterations after the restored
// one are those an uninterrupted run has. (The root cannot: its iterator is
// gone from a checkpoint once its range is read, which the pipeline's buffers
// do before the last batches of an iteration are taken, and a fresh process's
// counter then started the next iteration at 0 again.)
//
// BznaHomeCheck: passes an element through where the process holds its marker
// variable (the pipeline runs where it was built), else fails with a message.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/pass_through_dataset.h"
#include "tensorflow/core/common_runtime/device_mgr.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/device.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/resource_mgr.h"
#include "tensorflow/core/framework/resource_var.h"
#include "tensorflow/core/framework/tensor.h"

namespace bzna_tf {
namespace epoch_positions_kernels {  // this file's own (the ops build may compile files together)
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

constexpr char kOpName[] = "BznaEpochPositions";

// How an iteration's positions follow from the counter.
struct Layout {
  int64_t per_epoch = 0;   // positions per data epoch (the shard's samples)
  int64_t stride = 0;      // data epochs per iteration
  int64_t batch_size = 0;  // positions per batch (an endless pipeline's skip)
  int64_t endless_stop = 0;  // > 0: endless; every iteration ends there
};

// [first, stop) of iteration `iteration`, `skip` batches in (endless only).
absl::Status IterationRange(const Layout& l, int64_t iteration, int64_t skip, int64_t* first, int64_t* stop) {
  int64_t epochs = 0, skipped = 0;
  const bool overflow = __builtin_mul_overflow(iteration, l.stride, &epochs) ||
                        __builtin_mul_overflow(epochs, l.per_epoch, first) ||
                        __builtin_mul_overflow(skip, l.batch_size, &skipped) ||
                        __builtin_add_overflow(*first, skipped, first);
  if (overflow || iteration < 0 || skip < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bzna_tf: the epoch counter (ds.bzna_epochs) holds [", iteration, ", ", skip,
        "], which no stream position can follow: set it to the iteration to run (ds.bzna_epochs.set)"));
  }
  if (l.endless_stop > 0) {
    *stop = l.endless_stop;
  } else if (__builtin_add_overflow(*first, l.stride * l.per_epoch, stop)) {
    return absl::InvalidArgumentError(absl::StrCat("bzna_tf: the epoch counter's iteration ", iteration,
                                                   " is past the last stream position"));
  }
  return absl::OkStatus();
}

// The counter's [iteration, skip], where it holds an initialized int64 pair
// (under its lock).
bool ReadCounter(tensorflow::Var* counter, int64_t* iteration, int64_t* skip) {
  const Tensor& value = *counter->tensor();
  if (!counter->is_initialized || value.dtype() != tensorflow::DT_INT64 || value.NumElements() != 2) return false;
  *iteration = value.flat<int64_t>()(0);
  *skip = value.flat<int64_t>()(1);
  return true;
}

// Sets the counter (under its lock) to a new tensor: readers may hold the old
// one (copy on write).
void SetCounter(tensorflow::Var* counter, int64_t iteration, int64_t skip) {
  Tensor next(tensorflow::DT_INT64, tensorflow::TensorShape({2}));
  next.flat<int64_t>()(0) = iteration;
  next.flat<int64_t>()(1) = skip;
  *counter->tensor() = std::move(next);
}

class NoSplits : public tensorflow::data::SplitProvider {
 public:
  absl::Status GetNext(Tensor*, bool*) override {
    return absl::FailedPreconditionError(absl::StrCat(
        "bzna_tf: an as_dataset pipeline built with initial_epoch=None cannot be split by tf.data service "
        "(its epoch counter lives in the process that built it): build it with an explicit initial_epoch"));
  }
  absl::Status Reset() override { return absl::OkStatus(); }
  absl::Status Save(std::function<std::string(std::string)>, IteratorStateWriter*) override {
    return absl::OkStatus();
  }
  absl::Status Restore(std::function<std::string(std::string)>, IteratorStateReader*) override {
    return absl::OkStatus();
  }
};

class Dataset : public DatasetBase {
 public:
  Dataset(OpKernelContext* ctx, Tensor handle, tensorflow::core::RefCountPtr<tensorflow::Var> counter,
          Layout layout)
      : DatasetBase(DatasetContext(ctx)),
        handle_(std::move(handle)),
        counter_(std::move(counter)),
        layout_(layout) {}

  std::unique_ptr<tensorflow::data::IteratorBase> MakeIteratorInternal(const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{this, absl::StrCat(prefix, "::BznaEpochPositions")});
  }
  const DataTypeVector& output_dtypes() const override {
    static const DataTypeVector* dtypes = new DataTypeVector({tensorflow::DT_INT64});
    return *dtypes;
  }
  const std::vector<PartialTensorShape>& output_shapes() const override {
    static const std::vector<PartialTensorShape>* shapes = new std::vector<PartialTensorShape>({{}});
    return *shapes;
  }
  std::string DebugString() const override { return absl::StrCat(kOpName, "Op::Dataset"); }
  // An iteration's length (where it starts is known once the counter is read).
  int64_t CardinalityInternal(tensorflow::data::CardinalityOptions) const override {
    return layout_.endless_stop > 0 ? tensorflow::data::kInfiniteCardinality : layout_.stride * layout_.per_epoch;
  }
  absl::Status InputDatasets(std::vector<const DatasetBase*>*) const override { return absl::OkStatus(); }
  // tf.data service's distributed_epoch mode asks every source for splits;
  // this one has none to give (the counter lives in the process that built
  // the pipeline), and says so if a split is ever asked for. (as_dataset puts
  // a check before it that fails first on the service's workers.)
  absl::Status MakeSplitProviders(
      std::vector<std::unique_ptr<tensorflow::data::SplitProvider>>* split_providers) const override {
    split_providers->push_back(std::make_unique<NoSplits>());
    return absl::OkStatus();
  }
  // The counter is state outside the graph (as_dataset's pipeline ignores it
  // in checkpoints: the running iteration's range is in the iterator's state).
  absl::Status CheckExternalState() const override {
    return absl::FailedPreconditionError(
        absl::StrCat(kOpName, " reads and advances an epoch counter variable"));
  }

  // Takes the next iteration from the counter: its [first, stop).
  absl::Status TakeIteration(int64_t* first, int64_t* stop) const {
    tensorflow::mutex_lock lock(*counter_->mu());
    int64_t iteration = 0, skip = 0;
    if (!ReadCounter(counter_.get(), &iteration, &skip)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "bzna_tf: the epoch counter (ds.bzna_epochs) is not an initialized int64 [iteration, skip] "
          "variable (in TF1 graph mode, run tf.compat.v1.global_variables_initializer() first); it holds ",
          counter_->DebugString()));
    }
    TF_RETURN_IF_ERROR(IterationRange(layout_, iteration, skip, first, stop));
    SetCounter(counter_.get(), iteration + 1, 0);
    return absl::OkStatus();
  }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                                  tensorflow::Node** output) const override {
    tensorflow::Node *counter = nullptr, *per_epoch = nullptr, *stride = nullptr, *batch_size = nullptr,
                     *endless_stop = nullptr;
    TF_RETURN_IF_ERROR(b->AddDatasetOrTensor(ctx, handle_, &counter));
    TF_RETURN_IF_ERROR(b->AddScalar(layout_.per_epoch, &per_epoch));
    TF_RETURN_IF_ERROR(b->AddScalar(layout_.stride, &stride));
    TF_RETURN_IF_ERROR(b->AddScalar(layout_.batch_size, &batch_size));
    TF_RETURN_IF_ERROR(b->AddScalar(layout_.endless_stop, &endless_stop));
    return b->AddDataset(this, {counter, per_epoch, stride, batch_size, endless_stop}, output);
  }

 private:
  class Iterator : public DatasetIterator<Dataset> {
   public:
    explicit Iterator(const Params& params) : DatasetIterator<Dataset>(params) {}

    // Its state is a cursor, saved after each element.
    // (No `override`: TensorFlow 2.16's IteratorBase does not declare it yet.)
    bool SymbolicCheckpointCompatible() const { return true; }

    // tf.data's experimental_warm_start has the buffers above this iterator ask
    // for its first element when the iterator is made, not when the caller
    // asks: the iteration would be taken at a time that depends on threads.
    // Keras makes an iterator at each epoch's end that it never reads, and
    // SyncEpochs sets the counter at the next epoch's beginning, so data
    // epochs would be skipped or read twice. Refused, before anything is read.
    absl::Status Initialize(IteratorContext* ctx) override {
      if (ctx->warm_start()) {
        return absl::FailedPreconditionError(absl::StrCat(
            "bzna_tf: this as_dataset pipeline takes its epoch from its epoch counter when its first "
            "batch is asked for, and tf.data's experimental_warm_start option (set on it or on a dataset "
            "made from it) would have it taken when the iterator is made: Keras makes an iterator at each "
            "epoch's end that it never reads, so epochs would be skipped or read twice. Leave "
            "experimental_warm_start off (tf.data.Options().experimental_warm_start = False)"));
      }
      return absl::OkStatus();
    }

    absl::Status GetNextInternal(IteratorContext*, std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      absl::MutexLock lock(&mu_);
      if (!started_) {
        TF_RETURN_IF_ERROR(dataset()->TakeIteration(&next_, &stop_));
        started_ = true;
      }
      *end_of_sequence = next_ >= stop_;
      if (*end_of_sequence) return absl::OkStatus();
      out_tensors->emplace_back(next_++);
      return absl::OkStatus();
    }

   protected:
    std::shared_ptr<tensorflow::data::model::Node> CreateNode(
        IteratorContext*, tensorflow::data::model::Node::Args args) const override {
      return tensorflow::data::model::MakeSourceNode(std::move(args));
    }

    absl::Status SaveInternal(SerializationContext*, IteratorStateWriter* writer) override {
      absl::MutexLock lock(&mu_);
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), "started", started_ ? 1 : 0));
      if (!started_) return absl::OkStatus();
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), "next", next_));
      return writer->WriteScalar(prefix(), "stop", stop_);
    }

    absl::Status RestoreInternal(IteratorContext*, IteratorStateReader* reader) override {
      absl::MutexLock lock(&mu_);
      int64_t started = 0;
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), "started", &started));
      started_ = started != 0;
      if (!started_) return absl::OkStatus();
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), "next", &next_));
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), "stop", &stop_));
      if (next_ < 0 || next_ > stop_) {
        return absl::DataLossError(absl::StrCat("restoring a ", kOpName, " iterator: saved position ", next_,
                                                " is outside [0, ", stop_, "]"));
      }
      return absl::OkStatus();
    }

   private:
    absl::Mutex mu_;
    bool started_ ABSL_GUARDED_BY(mu_) = false;  // the counter was read
    int64_t next_ ABSL_GUARDED_BY(mu_) = 0;
    int64_t stop_ ABSL_GUARDED_BY(mu_) = 0;
  };

  const Tensor handle_;
  const tensorflow::core::RefCountPtr<tensorflow::Var> counter_;
  const Layout layout_;
};

// The counter variable `handle` names, which may live on another CPU device of
// the process than this kernel's (tf.distribute places a replica's dataset on
// that replica's device, while the counter lives in host memory on the first
// CPU): an eager variable's handle owns it; else the resource manager of the
// device it names holds it. `op` names the asking op in errors.
absl::Status FindCounter(OpKernelContext* ctx, const char* op, const tensorflow::ResourceHandle& handle,
                         tensorflow::core::RefCountPtr<tensorflow::Var>* counter) {
  if (handle.IsRefCounting()) {
    auto found = handle.GetResource<tensorflow::Var>();
    TF_RETURN_IF_ERROR(found.status());
    found.value()->Ref();  // the caller's own reference
    counter->reset(found.value());
    return absl::OkStatus();
  }
  tensorflow::FunctionLibraryRuntime* flr = ctx->function_library();
  tensorflow::Device* home = nullptr;
  if (flr == nullptr || flr->device_mgr() == nullptr || handle.device().empty() ||
      !flr->device_mgr()->LookupDevice(handle.device(), &home).ok()) {
    return tensorflow::LookupResource(ctx, handle, counter);
  }
  if (home->device_type() != tensorflow::DEVICE_CPU) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ": the epoch counter must live in host memory; it is on ", handle.device()));
  }
  TF_RETURN_IF_ERROR(handle.ValidateType<tensorflow::Var>());
  tensorflow::Var* var = nullptr;
  TF_RETURN_IF_ERROR(home->resource_manager()->Lookup<tensorflow::Var>(handle.container(), handle.name(), &var));
  counter->reset(var);  // Lookup gave a new reference
  return absl::OkStatus();
}

class EpochPositionsOp : public tensorflow::data::DatasetOpKernel {
 public:
  explicit EpochPositionsOp(OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {}

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override {
    tensorflow::core::RefCountPtr<tensorflow::Var> counter;
    OP_REQUIRES_OK(ctx, FindCounter(ctx, kOpName, tensorflow::HandleFromInput(ctx, 0), &counter));
    Layout layout;
    for (const auto& [name, field] : {std::pair<const char*, int64_t*>{"per_epoch", &layout.per_epoch},
                                      {"stride", &layout.stride},
                                      {"batch_size", &layout.batch_size},
                                      {"endless_stop", &layout.endless_stop}}) {
      OP_REQUIRES_OK(ctx, tensorflow::data::ParseScalarArgument<int64_t>(ctx, name, field));
      OP_REQUIRES(ctx, *field >= 0,
                  absl::InvalidArgumentError(absl::StrCat("expected ", name, " >= 0. Received ", *field)));
    }
    int64_t unused = 0;
    OP_REQUIRES(ctx, !__builtin_mul_overflow(layout.stride, layout.per_epoch, &unused),
                absl::InvalidArgumentError("stride * per_epoch overflows int64"));
    *output = new Dataset(ctx, ctx->input(0), std::move(counter), layout);
  }
};

REGISTER_KERNEL_BUILDER(Name(kOpName).Device(tensorflow::DEVICE_CPU), EpochPositionsOp);

// BznaHomeCheck: the element, where this device's resource manager holds the
// process's marker variable (ops/dataset_ops.cc).
class HomeCheckOp : public tensorflow::OpKernel {
 public:
  explicit HomeCheckOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("container", &container_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shared_name", &name_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("message", &message_));
  }

  void Compute(OpKernelContext* ctx) override {
    tensorflow::ResourceMgr* resources = ctx->resource_manager();
    tensorflow::Var* marker = nullptr;
    // An empty container is the default one, as VarHandleOp has it (TF1 graph variables).
    bool here = resources != nullptr &&
                resources->Lookup<tensorflow::Var>(container_.empty() ? resources->default_container() : container_,
                                                   name_, &marker)
                    .ok();
    if (here) {
      tensorflow::core::ScopedUnref unref(marker);
      tensorflow::tf_shared_lock lock(*marker->mu());
      here = marker->is_initialized;
    }
    OP_REQUIRES(ctx, here, absl::InvalidArgumentError(message_));
    ctx->set_output(0, ctx->input(0));
  }

 private:
  std::string container_;
  std::string name_;
  std::string message_;
};

REGISTER_KERNEL_BUILDER(Name("BznaHomeCheck").Device(tensorflow::DEVICE_CPU), HomeCheckOp);

constexpr char kCheckpointOpName[] = "BznaEpochCounterCheckpointDataset";
// Its iterators' checkpoint keys keep the op's first name: checkpoints written
// before the rename restore. (The name ends in "Dataset" because tf.distribute's
// auto-sharding adds its shard op only after ops so named.)
constexpr char kCheckpointIteratorName[] = "::BznaEpochCounterCheckpoint";

// With a stated `cardinality`, the op stands in for the AssertCardinalityDataset
// that as_dataset put under it before: it states the count without asserting
// it (a batch that fails is not counted, and AssertCardinality then fails at
// the end of every later call too: after `ignore_errors` a pipeline never
// ended), and its input's iterator keeps the prefix it had under
// AssertCardinality, so that checkpoints written with it restore.
constexpr char kStandsFor[] = "::AssertCardinality";

class CounterCheckpointDataset : public PassThroughDataset {
 public:
  CounterCheckpointDataset(OpKernelContext* ctx, const DatasetBase* input, Tensor handle,
                           tensorflow::core::RefCountPtr<tensorflow::Var> counter, int64_t cardinality)
      : PassThroughDataset(ctx, input, kCheckpointOpName, kCheckpointIteratorName,
                           cardinality == tensorflow::data::kUnknownCardinality ? "" : kStandsFor, cardinality),
        handle_(std::move(handle)),
        counter_(std::move(counter)) {}

  absl::Status CheckExternalState() const override {
    return absl::FailedPreconditionError(
        absl::StrCat(kCheckpointOpName, " reads and sets an epoch counter variable"));
  }

  // The counter's [iteration, skip] (false: it holds none).
  bool Counter(int64_t* iteration, int64_t* skip) const {
    tensorflow::tf_shared_lock lock(*counter_->mu());
    return ReadCounter(counter_.get(), iteration, skip);
  }

  // A restored [iteration, skip]: the counter moves there, unless it is there
  // or further already (never back), or holds no pair (TF1: left to its
  // initializer, or to its own restore).
  void MoveCounterTo(int64_t iteration, int64_t skip) const {
    tensorflow::mutex_lock lock(*counter_->mu());
    int64_t now = 0, now_skip = 0;
    if (!ReadCounter(counter_.get(), &now, &now_skip)) return;
    if (std::make_pair(now, now_skip) < std::make_pair(iteration, skip)) {
      SetCounter(counter_.get(), iteration, skip);
    }
  }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                                  tensorflow::Node** output) const override {
    tensorflow::Node *input = nullptr, *counter = nullptr;
    TF_RETURN_IF_ERROR(b->AddInputDataset(ctx, input_, &input));
    TF_RETURN_IF_ERROR(b->AddDatasetOrTensor(ctx, handle_, &counter));
    tensorflow::AttrValue cardinality;
    b->BuildAttrValue(cardinality_, &cardinality);
    return b->AddDataset(this, {input, counter}, {{"cardinality", cardinality}}, output);
  }

  absl::Status SaveState(IteratorStateWriter* writer, const std::string& prefix) const override {
    int64_t iteration = 0, skip = 0;
    if (!Counter(&iteration, &skip)) return absl::OkStatus();
    TF_RETURN_IF_ERROR(writer->WriteScalar(prefix, "iteration", iteration));
    return writer->WriteScalar(prefix, "skip", skip);
  }

  absl::Status RestoreState(IteratorStateReader* reader, const std::string& prefix,
                            const std::function<absl::Status()>& restore_input) const override {
    TF_RETURN_IF_ERROR(restore_input());
    if (!reader->Contains(prefix, "iteration")) return absl::OkStatus();  // no counter saved
    int64_t iteration = 0, skip = 0;
    TF_RETURN_IF_ERROR(reader->ReadScalar(prefix, "iteration", &iteration));
    TF_RETURN_IF_ERROR(reader->ReadScalar(prefix, "skip", &skip));
    if (iteration < 0 || skip < 0) {
      return absl::DataLossError(absl::StrCat("restoring a ", kCheckpointOpName, " iterator: saved epoch counter [",
                                              iteration, ", ", skip, "] is negative"));
    }
    MoveCounterTo(iteration, skip);
    return absl::OkStatus();
  }

 private:
  const Tensor handle_;
  const tensorflow::core::RefCountPtr<tensorflow::Var> counter_;
};

class CounterCheckpointOp : public tensorflow::data::UnaryDatasetOpKernel {
 public:
  explicit CounterCheckpointOp(OpKernelConstruction* ctx) : UnaryDatasetOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("cardinality", &cardinality_));
    OP_REQUIRES(ctx, cardinality_ >= tensorflow::data::kUnknownCardinality,
                absl::InvalidArgumentError(absl::StrCat("expected a cardinality >= -2. Received ", cardinality_)));
  }

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase* input, DatasetBase** output) override {
    tensorflow::core::RefCountPtr<tensorflow::Var> counter;
    OP_REQUIRES_OK(ctx, FindCounter(ctx, kCheckpointOpName, tensorflow::HandleFromInput(ctx, 1), &counter));
    *output = new CounterCheckpointDataset(ctx, input, ctx->input(1), std::move(counter), cardinality_);
  }

 private:
  int64_t cardinality_ = tensorflow::data::kUnknownCardinality;
};

REGISTER_KERNEL_BUILDER(Name(kCheckpointOpName).Device(tensorflow::DEVICE_CPU), CounterCheckpointOp);
// Its former name (custom_ops/ops/dataset_ops.cc): graphs written before the rename load.
REGISTER_KERNEL_BUILDER(Name("BznaEpochCounterCheckpoint").Device(tensorflow::DEVICE_CPU), CounterCheckpointOp);

}  // namespace
}  // namespace epoch_positions_kernels
}  // namespace bzna_tf
