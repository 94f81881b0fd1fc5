// BznaDecodeWarpDataset's GPU kernel (the op is registered by the CPU
// library, ops/decode_dataset_ops.cc; the dataset and iterator are
// kernels/decode_dataset.h, which the CPU kernel shares): each batch is
// submitted to the GPU core's asynchronous queue (gpu/core/bzna_gpu.h, ABI 4),
// which decodes it with NVDEC and warps it on the core's own sessions and
// streams while earlier batches are used, and is collected into an output
// TensorFlow allocated on the iterator's GPU, copied on TensorFlow's compute
// stream after the work already queued there. Part of the NVDEC library:
// loaded only where NVDEC is available.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gpu/core/bzna_gpu.h"
#include "gpu/tf_common.h"
#include "kernels/decode_dataset.h"
#include "kernels/warp_common.h"
#include "tensorflow/core/framework/device.h"
#include "tensorflow/core/framework/device_base.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/types.h"

namespace bzna_tf {
namespace decode_dataset {
namespace {

// Set by bzna_tf_gpu_set_skip_reporter (bzna_tf/ops/_load.py, once this
// library is loaded): the ops library's bzna_tf_report_skip.
std::atomic<SkipReporter> skip_reporter{nullptr};

SkipReporter GpuReporter() { return skip_reporter.load(); }

// Where on_error = "skip" gets the reasons the core gives (they fit).
constexpr size_t kMessageBytes = 1024;

class GpuBackend : public DecodeBackend {
 public:
  GpuBackend(const Spec& spec, tensorflow::Device* device, bzna_gpu_queue* queue)
      : spec_(spec), device_(device), queue_(queue) {}

  // Cancels what has not started, waits for the batch being decoded.
  ~GpuBackend() override { bzna_gpu_queue_destroy(queue_); }

  static absl::Status Make(IteratorContext* ctx, const Spec& spec, std::unique_ptr<DecodeBackend>* out) {
    tensorflow::Device* device = ctx->flr() == nullptr ? nullptr : ctx->flr()->device();
    const auto* info = device == nullptr ? nullptr : device->tensorflow_accelerator_device_info();
    if (info == nullptr || info->stream == nullptr || info->default_context == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          kOpName, "'s GPU kernel runs on a device without a GPU stream (",
          device == nullptr ? "none" : device->name(), ")"));
    }
    if (spec.depth > 64) {
      return absl::InvalidArgumentError(
          absl::StrCat(kOpName, " on a GPU decodes at most 64 batches ahead. Received depth ", spec.depth));
    }
    bzna_gpu_queue* queue = nullptr;
    TF_RETURN_IF_ERROR(CoreStatus(bzna_gpu_queue_create(info->gpu_id, static_cast<int32_t>(spec.depth), &queue)));
    *out = std::make_unique<GpuBackend>(spec, device, queue);
    return absl::OkStatus();
  }

  // The core copies the pictures, matrices and sizes before returning.
  absl::Status Submit(const Batch& batch, int64_t* ticket) override {
    const int64_t n = batch.size();
    const auto strings = batch.components[kData].flat<tensorflow::tstring>();
    std::vector<const uint8_t*> pictures(n);
    std::vector<uint64_t> sizes(n);
    for (int64_t i = 0; i < n; ++i) {
      pictures[i] = reinterpret_cast<const uint8_t*>(strings(i).data());
      sizes[i] = strings(i).size();
    }
    const bzna_gpu_warp_params p = CoreParams(spec_.args, Layout());
    // Always SKIP_BAD: a picture that fails is named with the batch's names
    // (or skipped) by the iterator, as on the CPU.
    return CoreStatus(bzna_gpu_submit(queue_, pictures.data(), sizes.data(), n,
                                      batch.components[kMatrices].flat<float>().data(), n,
                                      batch.components[kPictureSizes].flat<int32_t>().data(), &p,
                                      BZNA_GPU_SKIP_BAD, ticket));
  }

  absl::Status Collect(IteratorContext*, int64_t ticket, const TensorShape& shape, Tensor* images,
                       std::vector<std::string>* errors) override {
    Tensor out(device_->GetAllocator(tensorflow::AllocatorAttributes()), tensorflow::DT_FLOAT, shape);
    if (!out.IsInitialized()) {
      return absl::ResourceExhaustedError(
          absl::StrCat(kOpName, ": out of GPU memory for a batch of ", shape.DebugString()));
    }
    void* stream = Stream();
    int64_t failures = 0;
    // On error the ticket is finished (nothing to release).
    TF_RETURN_IF_ERROR(
        CoreStatus(bzna_gpu_collect(queue_, ticket, stream, out.flat<float>().data(), nullptr, &failures)));
    absl::Status s;
    for (int64_t k = 0; k < failures && s.ok(); ++k) {
      int64_t sample = -1;
      char message[kMessageBytes] = {0};
      s = CoreStatus(bzna_gpu_ticket_failure(queue_, ticket, k, &sample, message, sizeof(message)));
      if (s.ok() && (sample < 0 || sample >= static_cast<int64_t>(errors->size()))) {
        s = absl::InternalError(absl::StrCat("the GPU core reported a failure of sample ", sample,
                                             " in a batch of ", errors->size()));
      }
      if (s.ok()) (*errors)[sample] = message[0] != '\0' ? message : "could not decode the picture";
    }
    const absl::Status released = CoreStatus(bzna_gpu_release(queue_, ticket, stream));
    TF_RETURN_IF_ERROR(s);
    TF_RETURN_IF_ERROR(released);
    *images = std::move(out);
    return absl::OkStatus();
  }

  // Every output but strings lives in GPU memory, int32 included: TF's GPU
  // IteratorGetNext declares no HostMemory outputs, so its int32 outputs are
  // device memory (memory_types.cc); only DT_STRING is always on the host.
  absl::Status Output(IteratorContext*, const Tensor& host, Tensor* out) override {
    if (host.dtype() == tensorflow::DT_STRING) {
      *out = host;
      return absl::OkStatus();
    }
    Tensor device(device_->GetAllocator(tensorflow::AllocatorAttributes()), host.dtype(), host.shape());
    if (!device.IsInitialized()) return absl::ResourceExhaustedError(absl::StrCat(kOpName, ": out of GPU memory"));
    if (host.NumElements() > 0) {
      TF_RETURN_IF_ERROR(Info()->default_context->CopyCPUTensorToDeviceSync(&host, device_, &device));
    }
    *out = std::move(device);
    return absl::OkStatus();
  }

  absl::Status Empty(IteratorContext*, const TensorShape& shape, Tensor* images) override {
    *images = Tensor(device_->GetAllocator(tensorflow::AllocatorAttributes()), tensorflow::DT_FLOAT, shape);
    return absl::OkStatus();
  }

  // Row copies on the compute stream (TensorFlow's same-device copy).
  absl::Status KeepImages(IteratorContext*, const std::vector<int64_t>& keep, const Tensor& images,
                          Tensor* out) override {
    TensorShape shape = images.shape();
    shape.set_dim(0, static_cast<int64_t>(keep.size()));
    Tensor kept(device_->GetAllocator(tensorflow::AllocatorAttributes()), tensorflow::DT_FLOAT, shape);
    if (!kept.IsInitialized()) return absl::ResourceExhaustedError(absl::StrCat(kOpName, ": out of GPU memory"));
    for (size_t i = 0; i < keep.size(); ++i) {
      const Tensor from = images.Slice(keep[i], keep[i] + 1);
      Tensor to = kept.Slice(static_cast<int64_t>(i), static_cast<int64_t>(i) + 1);
      absl::Notification copied;
      absl::Status s;
      Info()->default_context->CopyTensorInSameDevice(&from, device_, &to, [&](const absl::Status& status) {
        s = status;
        copied.Notify();
      });
      copied.WaitForNotification();
      TF_RETURN_IF_ERROR(s);
    }
    *out = std::move(kept);
    return absl::OkStatus();
  }

 private:
  const tensorflow::DeviceBase::AcceleratorDeviceInfo* Info() const {
    return device_->tensorflow_accelerator_device_info();
  }

  // TensorFlow's compute stream of the device (a CUstream).
  void* Stream() const { return Info()->stream->platform_specific_handle().stream; }

  warp::OutputLayout Layout() const {
    warp::OutputLayout layout;
    layout.height = spec_.args.out_height;
    layout.width = spec_.args.out_width;
    layout.channels_first = spec_.channels_first;
    return layout;
  }

  const Spec spec_;
  tensorflow::Device* const device_;
  bzna_gpu_queue* const queue_;
};

class GpuDatasetOp : public DatasetOp {
 public:
  explicit GpuDatasetOp(OpKernelConstruction* ctx) : DatasetOp(ctx, &GpuBackend::Make, &GpuReporter) {}
};

// The dataset variants and the warp's small vectors are host memory.
REGISTER_KERNEL_BUILDER(Name(kOpName)
                            .Device(tensorflow::DEVICE_GPU)
                            .HostMemory("input_dataset")
                            .HostMemory("handle")
                            .BZNA_WARP_HOST_INPUTS,
                        GpuDatasetOp);

}  // namespace
}  // namespace decode_dataset
}  // namespace bzna_tf

// Connects the ops library's skip counter (bzna_tf_report_skip) to this
// library's kernel: TensorFlow loads each library with its own symbols.
extern "C" void bzna_tf_gpu_set_skip_reporter(bzna_tf::decode_dataset::SkipReporter reporter) {
  bzna_tf::decode_dataset::skip_reporter.store(reporter);
}
