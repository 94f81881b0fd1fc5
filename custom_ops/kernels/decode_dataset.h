// BznaDecodeWarpDataset's dataset and iterator, shared by its CPU kernel
// (kernels/decode_dataset_kernels.cc, in the ops library) and its GPU kernel
// (gpu/tf_decode_dataset_kernels.cc, in the NVDEC library). Header-only, as
// both libraries compile it; each supplies a DecodeBackend.
//
// The input dataset yields the batches of as_dataset's CPU pipeline before
// decoding: pictures, matrices, picture sizes, the samples' names, reading's
// errors, then components passed through (labels, filenames). The iterator
// keeps up to `depth` of them submitted to the backend, which decodes them in
// the background, and yields (images, pass-through...) in input order.

#ifndef BZNA_TF_KERNELS_DECODE_DATASET_H_
#define BZNA_TF_KERNELS_DECODE_DATASET_H_

#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/warp_common.h"
#include "tensorflow/core/common_runtime/device_mgr.h"
#include "tensorflow/core/common_runtime/process_function_library_runtime.h"
#include "tensorflow/core/framework/device.h"
#include "tensorflow/core/framework/function.h"
#include "tensorflow/core/framework/function_handle_cache.h"
#include "lib/warp.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"

namespace bzna_tf {
namespace decode_dataset {

using ::tensorflow::DataTypeVector;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::IteratorBase;
using ::tensorflow::data::IteratorContext;
using ::tensorflow::data::IteratorStateReader;
using ::tensorflow::data::IteratorStateWriter;
using ::tensorflow::data::SerializationContext;

constexpr char kOpName[] = "BznaDecodeWarpDataset";

// The input element's components, in order; the pass-through ones follow.
enum Component : int { kData = 0, kMatrices, kPictureSizes, kNames, kReadErrors, kPassThrough };

// Counts one skipped sample under `counter` and logs it (bzna_tf_report_skip
// of the ops library: BznaReportSkips' registry, so that ds.bzna_skipped and
// the warnings are the CPU path's).
using SkipReporter = void (*)(const char* counter, const char* reason);

// What a backend decodes: one input batch.
struct Batch {
  std::vector<Tensor> components;  // the input element, host memory
  int64_t size() const { return components[kData].dim_size(0); }
};

// One device's decoding. Submit starts decoding a batch and returns at once
// (or blocks while the backend holds as many batches as it can); Collect
// waits for it. Batches are collected in submission order, each once.
// Destroying the backend cancels what has not started and waits for what
// has.
class DecodeBackend {
 public:
  virtual ~DecodeBackend() = default;

  // Starts decoding `batch` (not empty); its tensors stay alive in the
  // caller until the batch is collected.
  virtual absl::Status Submit(const Batch& batch, int64_t* ticket) = 0;

  // Waits for `ticket`'s batch and writes its images into `images`
  // (allocated here, on the device the iterator runs on) and each sample's
  // decoding error into `errors` ("" where it decoded). A returned error
  // fails the batch whatever on_error says (no decoder, out of memory).
  virtual absl::Status Collect(IteratorContext* ctx, int64_t ticket, const TensorShape& shape,
                               Tensor* images, std::vector<std::string>* errors) = 0;

  // A pass-through component of the input (host memory: the input runs on
  // the host) as the device's output: the tensor itself on the CPU; on a GPU
  // a copy in GPU memory for every type but strings, int32 included (the GPU
  // IteratorGetNext declares no HostMemory outputs).
  virtual absl::Status Output(IteratorContext* ctx, const Tensor& host, Tensor* out) = 0;

  // An empty image batch of `shape` on the device.
  virtual absl::Status Empty(IteratorContext* ctx, const TensorShape& shape, Tensor* images) = 0;

  // Samples keep[0], keep[1], ... of `images` (a collected batch, on the
  // device), as a batch of keep.size() samples: what is left once the
  // skipped samples are dropped.
  virtual absl::Status KeepImages(IteratorContext* ctx, const std::vector<int64_t>& keep, const Tensor& images,
                                  Tensor* out) = 0;
};

// The dataset's fixed arguments.
struct Spec {
  WarpArgs args;       // output size, colour; no matrices (each batch's)
  bool channels_first = false;
  bool skip = false;   // on_error = "skip"
  int64_t depth = 1;   // batches decoded ahead
  std::string counter; // skip counter (with skip)
  DataTypeVector dtypes;
  std::vector<PartialTensorShape> shapes;
  Tensor output_shape, bias, norm, oob;  // the op's inputs, for AsGraphDef
};

// Makes a backend for an iterator of `spec` running in `ctx` (its device).
using BackendFactory = absl::Status (*)(IteratorContext* ctx, const Spec& spec,
                                        std::unique_ptr<DecodeBackend>* backend);

// "<name>: <reason>": how a sample's decoding error reads, as BznaDecodeWarp
// writes it (DecodeErrors::Fail).
inline std::string NamedError(const Batch& batch, int64_t n, absl::string_view reason) {
  const Tensor& names = batch.components[kNames];
  const std::string name = names.NumElements() > n ? std::string(names.flat<tensorflow::tstring>()(n))
                                                   : absl::StrCat("sample ", n, " of the batch");
  return absl::StrCat(name, ": ", reason);
}

class Dataset : public DatasetBase {
 public:
  Dataset(OpKernelContext* ctx, const DatasetBase* input, Spec spec, BackendFactory factory,
          SkipReporter reporter)
      : DatasetBase(tensorflow::data::DatasetContext(ctx)),
        input_(input),
        spec_(std::move(spec)),
        factory_(factory),
        reporter_(reporter) {
    input_->Ref();
  }

  ~Dataset() override { input_->Unref(); }

  std::unique_ptr<IteratorBase> MakeIteratorInternal(const std::string& prefix) const override;

  const DataTypeVector& output_dtypes() const override { return spec_.dtypes; }
  const std::vector<PartialTensorShape>& output_shapes() const override { return spec_.shapes; }
  std::string DebugString() const override { return absl::StrCat(kOpName, "Op::Dataset"); }

  // One output batch per input batch.
  int64_t CardinalityInternal(tensorflow::data::CardinalityOptions options) const override {
    return input_->Cardinality(options);
  }

  absl::Status InputDatasets(std::vector<const DatasetBase*>* inputs) const override {
    inputs->push_back(input_);
    return absl::OkStatus();
  }

  absl::Status CheckExternalState() const override { return input_->CheckExternalState(); }

  const Spec& spec() const { return spec_; }
  BackendFactory factory() const { return factory_; }
  SkipReporter reporter() const { return reporter_; }
  const DatasetBase* input() const { return input_; }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                                  tensorflow::Node** output) const override {
    tensorflow::Node* input = nullptr;
    TF_RETURN_IF_ERROR(b->AddInputDataset(ctx, input_, &input));
    tensorflow::Node *shape = nullptr, *bias = nullptr, *norm = nullptr, *oob = nullptr;
    TF_RETURN_IF_ERROR(b->AddTensor(spec_.output_shape, &shape));
    TF_RETURN_IF_ERROR(b->AddTensor(spec_.bias, &bias));
    TF_RETURN_IF_ERROR(b->AddTensor(spec_.norm, &norm));
    TF_RETURN_IF_ERROR(b->AddTensor(spec_.oob, &oob));
    tensorflow::AttrValue data_format, antialias, on_error, depth, counter;
    b->BuildAttrValue(std::string(spec_.channels_first ? warp::kChannelsFirst : "NHWC"), &data_format);
    b->BuildAttrValue(spec_.args.antialias, &antialias);
    b->BuildAttrValue(std::string(spec_.skip ? "skip" : "raise"), &on_error);
    b->BuildAttrValue(spec_.depth, &depth);
    b->BuildAttrValue(spec_.counter, &counter);
    return b->AddDataset(this, {input, shape, bias, norm, oob},
                         {{warp::kDataFormatAttr, data_format},
                          {warp::kAntialiasAttr, antialias},
                          {"on_error", on_error},
                          {"depth", depth},
                          {"counter", counter}},
                         output);
  }

 private:
  class Iterator;

  const DatasetBase* const input_;
  const Spec spec_;
  const BackendFactory factory_;
  const SkipReporter reporter_;
};

// Checks an input element: the five leading components and the pass-through
// ones, all with the batch's leading dimension.
inline absl::Status CheckBatch(const Batch& batch, size_t components) {
  const auto& c = batch.components;
  if (c.size() != components) {
    return absl::InvalidArgumentError(absl::StrCat("expected input elements of ", components,
                                                   " components. Received ", c.size()));
  }
  TF_RETURN_IF_ERROR(CheckPictures(c[kData]));
  const int64_t n = c[kData].dim_size(0);
  const Tensor& m = c[kMatrices];
  if (m.dims() != 3 || m.dim_size(0) != n || m.dim_size(1) != 3 || m.dim_size(2) != 3) {
    return absl::InvalidArgumentError(absl::StrCat("expected matrices of shape [", n,
                                                   ", 3, 3]. Received shape ", m.shape().DebugString()));
  }
  const Tensor& s = c[kPictureSizes];
  if (s.dims() != 2 || s.dim_size(0) != n || s.dim_size(1) != 2) {
    return absl::InvalidArgumentError(absl::StrCat("expected picture_sizes of shape [", n,
                                                   ", 2]. Received shape ", s.shape().DebugString()));
  }
  for (size_t k = kNames; k < c.size(); ++k) {
    if (c[k].dims() < 1 || c[k].dim_size(0) != n) {
      return absl::InvalidArgumentError(absl::StrCat("expected input component ", k, " with ", n,
                                                     " rows (the batch's). Received shape ",
                                                     c[k].shape().DebugString()));
    }
  }
  return absl::OkStatus();
}

// Rows `keep` of t (a pass-through component), in order.
inline Tensor KeepRows(const Tensor& t, const std::vector<int64_t>& keep) {
  TensorShape shape = t.shape();
  shape.set_dim(0, static_cast<int64_t>(keep.size()));
  Tensor out(t.dtype(), shape);
  for (size_t i = 0; i < keep.size(); ++i) {
    // CopyFrom of a row slice handles every dtype, strings included.
    Tensor row = t.SubSlice(keep[i]);
    Tensor dst = out.SubSlice(static_cast<int64_t>(i));
    if (t.dtype() == tensorflow::DT_STRING) {
      const auto from = row.unaligned_flat<tensorflow::tstring>();
      auto to = dst.unaligned_flat<tensorflow::tstring>();
      for (int64_t j = 0; j < from.size(); ++j) to(j) = from(j);
    } else {
      const auto bytes = row.tensor_data();
      std::memcpy(const_cast<char*>(dst.tensor_data().data()), bytes.data(), bytes.size());
    }
  }
  return out;
}

class Dataset::Iterator : public tensorflow::data::DatasetIterator<Dataset> {
 public:
  explicit Iterator(const Params& params) : DatasetIterator<Dataset>(params) {}

  // With symbolic checkpoints (Options.experimental_symbolic_checkpoint) a
  // checkpoint holds no batch in flight: each yielded batch hands on the input
  // iterator's state as of that batch (its `checkpoint`), so a restored
  // iterator reads the batches that were in flight again, as tf.data's
  // prefetch does.
  // (No `override`: TensorFlow 2.16's IteratorBase does not declare it yet.)
  bool SymbolicCheckpointCompatible() const { return true; }

  ~Iterator() override {
    // The backend first: it waits for the batch being decoded, whose tensors
    // `pending_` holds.
    absl::MutexLock lock(&mu_);
    backend_.reset();
  }

  absl::Status Initialize(IteratorContext* ctx) override {
    absl::MutexLock lock(&mu_);
    TF_RETURN_IF_ERROR(FindHost(ctx));
    IteratorContext host = HostContext(ctx);
    TF_RETURN_IF_ERROR(dataset()->input()->MakeIterator(&host, this, prefix(), &input_impl_));
    ctx->MergeCheckpoint(host.checkpoint());
    return dataset()->factory()(ctx, dataset()->spec(), &backend_);
  }

  absl::Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out_tensors,
                               bool* end_of_sequence) override {
    absl::MutexLock lock(&mu_);
    TF_RETURN_IF_ERROR(Fill(ctx));
    if (pending_.empty()) {
      *end_of_sequence = true;
      return absl::OkStatus();
    }
    *end_of_sequence = false;
    Pending next = std::move(pending_.front());
    pending_.pop_front();
    ctx->MergeCheckpoint(&next.checkpoint);
    absl::Status s = next.status;
    if (s.ok()) s = Finish(ctx, next, out_tensors);
    // Keep `depth` batches decoding while the caller uses this one.
    absl::Status fill = Fill(ctx);
    TF_RETURN_IF_ERROR(s);
    return fill;
  }

 protected:
  std::shared_ptr<tensorflow::data::model::Node> CreateNode(
      IteratorContext*, tensorflow::data::model::Node::Args args) const override {
    return tensorflow::data::model::MakeKnownRatioNode(std::move(args), /*ratio=*/1);
  }

  // The input iterator, then the batches in flight (their input tensors, or
  // the error they hold): a restored iterator submits them again and yields
  // exactly what this one would have.
  absl::Status SaveInternal(SerializationContext* ctx, IteratorStateWriter* writer) override {
    if (ctx->symbolic_checkpoint()) return absl::OkStatus();  // see SymbolicCheckpointCompatible
    absl::MutexLock lock(&mu_);
    TF_RETURN_IF_ERROR(SaveInput(ctx, writer, input_impl_));
    TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), "input_done", input_done_ ? 1 : 0));
    TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), "pending", static_cast<int64_t>(pending_.size())));
    for (size_t i = 0; i < pending_.size(); ++i) {
      const Pending& p = pending_[i];
      const std::string key = absl::StrCat("pending[", i, "]");
      TF_RETURN_IF_ERROR(writer->WriteScalar(prefix(), absl::StrCat(key, ".code"),
                                             static_cast<int64_t>(p.status.code())));
      if (!p.status.ok()) {
        TF_RETURN_IF_ERROR(
            writer->WriteScalar(prefix(), absl::StrCat(key, ".message"), std::string(p.status.message())));
        continue;
      }
      const auto& c = p.batch.components;
      TF_RETURN_IF_ERROR(
          writer->WriteScalar(prefix(), absl::StrCat(key, ".size"), static_cast<int64_t>(c.size())));
      for (size_t k = 0; k < c.size(); ++k) {
        TF_RETURN_IF_ERROR(writer->WriteTensor(prefix(), absl::StrCat(key, "[", k, "]"), c[k]));
      }
    }
    return absl::OkStatus();
  }

  absl::Status RestoreInternal(IteratorContext* ctx, IteratorStateReader* reader) override {
    absl::MutexLock lock(&mu_);
    // Drop what is decoding (a fresh backend), then take the saved batches.
    pending_.clear();
    backend_.reset();
    TF_RETURN_IF_ERROR(dataset()->factory()(ctx, dataset()->spec(), &backend_));
    IteratorContext host = HostContext(ctx);
    TF_RETURN_IF_ERROR(RestoreInput(&host, reader, input_impl_));
    ctx->MergeCheckpoint(host.checkpoint());
    input_done_ = false;
    if (ctx->symbolic_checkpoint()) return absl::OkStatus();  // no batch was saved
    int64_t done = 0, count = 0;
    TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), "input_done", &done));
    TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), "pending", &count));
    if (count < 0 || count > dataset()->spec().depth) {
      return absl::DataLossError(absl::StrCat("restoring a ", kOpName, " iterator: ", count,
                                              " batches in flight, for a depth of ", dataset()->spec().depth));
    }
    input_done_ = done != 0;
    for (int64_t i = 0; i < count; ++i) {
      const std::string key = absl::StrCat("pending[", i, "]");
      int64_t code = 0;
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), absl::StrCat(key, ".code"), &code));
      Pending p(ctx);
      if (code != 0) {
        tensorflow::tstring message;
        TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), absl::StrCat(key, ".message"), &message));
        p.status = absl::Status(static_cast<absl::StatusCode>(code), std::string(message));
        pending_.push_back(std::move(p));
        continue;
      }
      int64_t size = 0;
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), absl::StrCat(key, ".size"), &size));
      if (size != static_cast<int64_t>(dataset()->input()->output_dtypes().size())) {
        return absl::DataLossError(absl::StrCat("restoring a ", kOpName, " iterator: a saved batch of ", size,
                                                " components, for input elements of ",
                                                dataset()->input()->output_dtypes().size()));
      }
      p.batch.components.resize(size);
      for (int64_t k = 0; k < size; ++k) {
        TF_RETURN_IF_ERROR(
            reader->ReadTensor(ctx->flr(), prefix(), absl::StrCat(key, "[", k, "]"), &p.batch.components[k]));
      }
      Submit(std::move(p));
    }
    return absl::OkStatus();
  }

 private:
  struct Pending {
    explicit Pending(IteratorContext* ctx) : checkpoint(ctx->id_registry()) {}
    absl::Status status;  // not OK: this position of the sequence is this error
    Batch batch;
    int64_t ticket = -1;  // the backend's, for a batch that is not empty
    // The input iterator's state once this batch was read (symbolic checkpoints).
    tensorflow::data::MemoryCheckpoint checkpoint;
  };

  // The CPU device of the iterator's task and a function library for it: the
  // input pipeline (reading, shuffling, matrices) runs there whatever device
  // this iterator runs on, its functions instantiated for the CPU and its
  // tensors in host memory, which is what the decoders read.
  absl::Status FindHost(IteratorContext* ctx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    tensorflow::FunctionLibraryRuntime* flr = ctx->flr();
    // (On a CPU too, where the host is that CPU: one code path, the one the
    // CPU tests run.)
    if (flr == nullptr || flr->device() == nullptr) return absl::OkStatus();
    tensorflow::Device* cpu = nullptr;
    const auto& here = flr->device()->parsed_name();
    for (tensorflow::Device* d : flr->device_mgr()->ListDevices()) {
      const auto& name = d->parsed_name();
      if (d->device_type() == tensorflow::DEVICE_CPU && name.job == here.job && name.replica == here.replica &&
          name.task == here.task) {
        cpu = d;
        break;
      }
    }
    if (cpu == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat(kOpName, " on ", flr->device()->name(), " found no CPU device of its task to read on"));
    }
    tensorflow::FunctionLibraryRuntime* unused = nullptr;
    TF_RETURN_IF_ERROR(flr->Clone(&lib_def_, &pflr_, &unused, /*skip_flib_def=*/true));
    host_flr_ = pflr_->GetFLR(cpu->name());
    if (host_flr_ == nullptr) {
      return absl::InternalError(absl::StrCat(kOpName, ": no function library for ", cpu->name()));
    }
    host_device_ = cpu;
    // Function handles belong to their library: the host's get their own cache.
    host_handles_ = std::make_unique<tensorflow::FunctionHandleCache>(host_flr_);
    return absl::OkStatus();
  }

  IteratorContext HostContext(IteratorContext* ctx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    IteratorContext::Params params(ctx);
    if (host_flr_ != nullptr) {
      params.flr = host_flr_;
      params.function_handle_cache = host_handles_.get();
      tensorflow::Device* device = host_device_;
      params.allocator_getter = [device](tensorflow::AllocatorAttributes attrs) {
        return device->GetAllocator(attrs);
      };
    }
    return IteratorContext(std::move(params));
  }

  // Submits p (unless it holds an error or no sample) and queues it.
  void Submit(Pending p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (p.status.ok()) p.status = CheckBatch(p.batch, dataset()->input()->output_dtypes().size());
    if (p.status.ok() && p.batch.size() > 0) p.status = backend_->Submit(p.batch, &p.ticket);
    pending_.push_back(std::move(p));
  }

  // Pulls input batches until `depth` are in flight or the input ends. An
  // input error takes its place in the sequence (later batches go on, as
  // tf.data's own iterators do after an error).
  absl::Status Fill(IteratorContext* ctx) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    IteratorContext host = HostContext(ctx);
    while (!input_done_ && static_cast<int64_t>(pending_.size()) < dataset()->spec().depth) {
      Pending p(ctx);
      bool end = false;
      p.status = input_impl_->GetNext(&host, &p.batch.components, &end);
      p.checkpoint.Merge(host.checkpoint());
      if (p.status.ok() && end) {
        input_done_ = true;
        break;
      }
      if (absl::IsCancelled(p.status)) return p.status;
      Submit(std::move(p));
    }
    return absl::OkStatus();
  }

  // The output element of a submitted batch: its images, then the
  // pass-through components; with on_error = "skip", without the samples
  // that could not be read or decoded (each counted and logged).
  absl::Status Finish(IteratorContext* ctx, const Pending& p, std::vector<Tensor>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const Spec& spec = dataset()->spec();
    const Batch& batch = p.batch;
    const int64_t n = batch.size();
    TensorShape shape;
    TF_RETURN_IF_ERROR(TensorShape::BuildTensorShape(
        spec.channels_first ? std::vector<int64_t>{n, 3, spec.args.out_height, spec.args.out_width}
                            : std::vector<int64_t>{n, spec.args.out_height, spec.args.out_width, 3},
        &shape));
    Tensor images;
    std::vector<std::string> errors(n);
    if (n > 0) {
      TF_RETURN_IF_ERROR(backend_->Collect(ctx, p.ticket, shape, &images, &errors));
    }
    // Reading's error first (an unread sample also fails to decode), then
    // decoding's, named as BznaDecodeWarp names them.
    const auto read_errors = batch.components[kReadErrors].flat<tensorflow::tstring>();
    std::vector<int64_t> keep;
    for (int64_t i = 0; i < n; ++i) {
      std::string error = read_errors(i).empty() ? std::string() : std::string(read_errors(i));
      if (error.empty() && !errors[i].empty()) {
        if (!spec.skip) return absl::InvalidArgumentError(NamedError(batch, i, errors[i]));
        error = NamedError(batch, i, errors[i]);
      }
      if (error.empty()) {
        keep.push_back(i);
        continue;
      }
      if (!spec.skip) return absl::InvalidArgumentError(error);
      SkipReporter report = dataset()->reporter();
      if (report == nullptr) {
        return absl::InternalError(
            absl::StrCat(kOpName, " cannot count skipped samples: bzna_tf's ops library did not connect ",
                         "its skip counter to this library (load it through bzna_tf)"));
      }
      report(spec.counter.c_str(), error.c_str());
    }
    const bool all = static_cast<int64_t>(keep.size()) == n;
    if (n == 0 || (!all && keep.empty())) {
      shape.set_dim(0, 0);
      TF_RETURN_IF_ERROR(backend_->Empty(ctx, shape, &images));
    } else if (!all) {
      Tensor kept;
      TF_RETURN_IF_ERROR(backend_->KeepImages(ctx, keep, images, &kept));
      images = std::move(kept);
    }
    out->clear();
    out->push_back(std::move(images));
    for (size_t k = kPassThrough; k < batch.components.size(); ++k) {
      Tensor rows = all ? batch.components[k] : KeepRows(batch.components[k], keep);
      Tensor device;
      TF_RETURN_IF_ERROR(backend_->Output(ctx, rows, &device));
      out->push_back(std::move(device));
    }
    return absl::OkStatus();
  }

  absl::Mutex mu_;
  // The host's function library (null where the iterator runs on the CPU).
  std::unique_ptr<tensorflow::FunctionLibraryDefinition> lib_def_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<tensorflow::ProcessFunctionLibraryRuntime> pflr_ ABSL_GUARDED_BY(mu_);
  tensorflow::FunctionLibraryRuntime* host_flr_ ABSL_GUARDED_BY(mu_) = nullptr;
  tensorflow::Device* host_device_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<tensorflow::FunctionHandleCache> host_handles_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<IteratorBase> input_impl_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<DecodeBackend> backend_ ABSL_GUARDED_BY(mu_);
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  bool input_done_ ABSL_GUARDED_BY(mu_) = false;
};

inline std::unique_ptr<IteratorBase> Dataset::MakeIteratorInternal(const std::string& prefix) const {
  return std::make_unique<Iterator>(Iterator::Params{this, absl::StrCat(prefix, "::BznaDecodeWarp")});
}

// The op's kernel on one device: checks the arguments and makes the dataset
// with that device's backend.
class DatasetOp : public tensorflow::data::UnaryDatasetOpKernel {
 public:
  // reporter() is asked at each MakeDataset: the GPU library's is connected
  // after it is loaded.
  DatasetOp(OpKernelConstruction* ctx, BackendFactory factory, SkipReporter (*reporter)())
      : UnaryDatasetOpKernel(ctx), factory_(factory), reporter_(reporter) {
    std::string data_format, on_error;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(warp::kDataFormatAttr, &data_format));
    spec_.channels_first = data_format == warp::kChannelsFirst;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(warp::kAntialiasAttr, &spec_.args.antialias));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("on_error", &on_error));
    spec_.skip = on_error == "skip";
    OP_REQUIRES_OK(ctx, ctx->GetAttr("depth", &spec_.depth));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("counter", &spec_.counter));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("output_types", &spec_.dtypes));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("output_shapes", &spec_.shapes));
    OP_REQUIRES(ctx, !spec_.skip || !spec_.counter.empty(),
                absl::InvalidArgumentError("on_error = \"skip\" needs a counter to count the skipped samples in"));
  }

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase* input, DatasetBase** output) override {
    Spec spec = spec_;
    const Tensor& size = ctx->input(1);
    OP_REQUIRES(ctx, size.dims() == 1 && size.dim_size(0) == 2,
                absl::InvalidArgumentError(absl::StrCat("expected output_shape of shape [2], (height, width). "
                                                        "Received shape ", size.shape().DebugString())));
    const auto hw = size.vec<int32_t>();
    OP_REQUIRES(ctx, hw(0) > 0 && hw(1) > 0,
                absl::InvalidArgumentError(absl::StrCat("expected a positive output_shape (height, width). "
                                                        "Received [", hw(0), ", ", hw(1), "]")));
    spec.args.out_height = hw(0);
    spec.args.out_width = hw(1);
    OP_REQUIRES_OK(ctx, CheckSide("an output height", spec.args.out_height));
    OP_REQUIRES_OK(ctx, CheckSide("an output width", spec.args.out_width));
    OP_REQUIRES_OK(ctx, ReadChannelVector(ctx->input(2), "bias", spec.args.color.bias));
    OP_REQUIRES_OK(ctx, ReadChannelVector(ctx->input(3), "norm", spec.args.color.norm));
    OP_REQUIRES_OK(ctx, ReadChannelVector(ctx->input(4), "oob_color", spec.args.color.oob));
    spec.output_shape = size;
    spec.bias = ctx->input(2);
    spec.norm = ctx->input(3);
    spec.oob = ctx->input(4);
    // The input: (data, matrices, picture_sizes, names, errors, pass-through...);
    // the output: (images, pass-through...).
    using ::tensorflow::DT_FLOAT;
    using ::tensorflow::DT_INT32;
    using ::tensorflow::DT_STRING;
    const DataTypeVector leading = {DT_STRING, DT_FLOAT, DT_INT32, DT_STRING, DT_STRING};
    const DataTypeVector& in = input->output_dtypes();
    bool fits = in.size() >= leading.size() && spec.dtypes.size() == in.size() - leading.size() + 1 &&
                spec.dtypes[0] == DT_FLOAT;
    for (size_t k = 0; fits && k < leading.size(); ++k) fits = in[k] == leading[k];
    for (size_t k = leading.size(); fits && k < in.size(); ++k) fits = in[k] == spec.dtypes[k - leading.size() + 1];
    OP_REQUIRES(ctx, fits,
                absl::InvalidArgumentError(absl::StrCat(
                    "expected input elements (data: string, matrices: float, picture_sizes: int32, names: string, "
                    "errors: string, then the components passed through) and output_types (float, then the same "
                    "components). Received input types ", tensorflow::DataTypeVectorString(in), " and output_types ",
                    tensorflow::DataTypeVectorString(spec.dtypes))));
    *output = new Dataset(ctx, input, std::move(spec), factory_, reporter_());
  }

 private:
  Spec spec_;
  const BackendFactory factory_;
  SkipReporter (*const reporter_)();
};

}  // namespace decode_dataset
}  // namespace bzna_tf

#endif  // BZNA_TF_KERNELS_DECODE_DATASET_H_
