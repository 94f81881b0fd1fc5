// GPU kernel of BznaDecodeWarp (the op is registered by the CPU library,
// ops/warp_ops.cc): NVDEC decodes the batch's pictures, pipelined over the
// GPU's decoder engines, and the CUDA warp writes each straight into the
// output TensorFlow allocated on the op's GPU (the core, gpu/core/nvdec.h).
// The core's streams start after the work queued on TensorFlow's stream, and
// the kernel returns once the batch is written. Loaded only where NVDEC is
// available, so that elsewhere the op runs on the CPU.

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "gpu/core/bzna_gpu.h"
#include "gpu/tf_common.h"
#include "kernels/warp_common.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/types.h"

namespace bzna_tf {
namespace {

using ::tensorflow::DEVICE_GPU;

// A single-picture decode's error without the "sample 0 of the batch: " the
// core puts before it (DecodeErrors names the picture), as the queue's
// Reason() does: the op and the dataset then say the same.
absl::Status WithoutSamplePrefix(const absl::Status& s) {
  constexpr absl::string_view kPrefix = "sample 0 of the batch: ";
  if (!absl::StartsWith(s.message(), kPrefix)) return s;
  return absl::Status(s.code(), s.message().substr(kPrefix.size()));
}

class DecodeWarpGpuOp : public DecodeWarpOpBase {
 public:
  explicit DecodeWarpGpuOp(OpKernelConstruction* ctx) : DecodeWarpOpBase(ctx) {}

 private:
  // picture_sizes is host memory (the registration below), as the core reads
  // it.
  void DecodeWarp(OpKernelContext* ctx, const Tensor& data, const PictureSizes& picture_sizes,
                  const WarpArgs& args, DecodeErrors* errors, Tensor* output) override {
    const int64_t batch = data.dim_size(0);
    const int32_t* picture_hw = picture_sizes.data();  // null: the decoded frames' sizes
    void* stream = nullptr;
    OP_REQUIRES_OK(ctx, OpStream(ctx, &stream));
    const auto strings = data.flat<tensorflow::tstring>();
    std::vector<const uint8_t*> pictures(batch);
    std::vector<uint64_t> sizes(batch);
    for (int64_t n = 0; n < batch; ++n) {
      pictures[n] = reinterpret_cast<const uint8_t*>(strings(n).data());
      sizes[n] = strings(n).size();
    }
    const bzna_gpu_warp_params p = CoreParams(args, Layout(args));
    float* out = output->flat<float>().data();
    const absl::Status all = CoreStatus(bzna_gpu_decode_warp(-1, stream, pictures.data(), sizes.data(), batch,
                                                             args.matrices, args.broadcast_matrix ? 1 : batch,
                                                             picture_hw, &p, out));
    if (all.ok()) return;
    if (!DecodeErrors::Skippable(all)) {
      ctx->SetStatus(all);  // the core's message names the sample
      return;
    }
    // Some picture is bad. Errors are rare: decode the batch again one picture
    // at a time, to name (or skip) each bad one; the good ones are rewritten.
    const int64_t per_sample = 3 * args.out_height * args.out_width;
    for (int64_t n = 0; n < batch; ++n) {
      const float* m = args.Matrix(n);
      const int32_t* size = picture_hw == nullptr ? nullptr : picture_hw + 2 * n;
      absl::Status s = CoreStatus(
          bzna_gpu_decode_warp(-1, stream, &pictures[n], &sizes[n], 1, m, 1, size, &p, out + n * per_sample));
      if (s.ok()) continue;
      OP_REQUIRES_OK(ctx, errors->Fail(n, WithoutSamplePrefix(s)));
      OP_REQUIRES_OK(ctx, CoreStatus(bzna_gpu_fill_oob(-1, stream, 1, &p, out + n * per_sample)));
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("BznaDecodeWarp")
                            .Device(DEVICE_GPU)
                            .HostMemory("data")
                            .HostMemory("names")
                            .HostMemory("picture_sizes")
                            .HostMemory("errors")
                            .BZNA_WARP_HOST_INPUTS,
                        DecodeWarpGpuOp);

}  // namespace
}  // namespace bzna_tf
