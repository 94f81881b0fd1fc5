// What the TensorFlow GPU kernels (tf_warp_kernels.cc, tf_decode_kernels.cc)
// share: the op's CUDA stream, the core's warp parameters, and the core's
// status as an absl::Status. All GPU work is the core's (gpu/core/bzna_gpu.h):
// these kernels only check inputs, allocate outputs and call it.

#ifndef BZNA_TF_GPU_TF_COMMON_H_
#define BZNA_TF_GPU_TF_COMMON_H_

#include "absl/status/status.h"
#include "gpu/core/bzna_gpu.h"
#include "kernels/warp_common.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "xla/stream_executor/stream.h"

namespace bzna_tf {

// The CUstream TensorFlow runs this op's GPU work on.
inline absl::Status OpStream(OpKernelContext* ctx, void** stream) {
  auto* device_context = ctx->op_device_context();
  if (device_context == nullptr || device_context->stream() == nullptr) {
    return absl::InternalError("bzna_tf's GPU kernel ran without a GPU stream");
  }
  *stream = device_context->stream()->platform_specific_handle().stream;
  return absl::OkStatus();
}

inline bzna_gpu_warp_params CoreParams(const WarpArgs& args, const warp::OutputLayout& layout) {
  bzna_gpu_warp_params p;
  p.out_height = static_cast<int32_t>(layout.height);
  p.out_width = static_cast<int32_t>(layout.width);
  for (int c = 0; c < 3; ++c) {
    p.bias[c] = args.color.bias[c];
    p.norm[c] = args.color.norm[c];
    p.oob[c] = args.color.oob[c];
  }
  p.channels_first = layout.channels_first ? 1 : 0;
  p.antialias = args.antialias ? 1 : 0;
  return p;
}

// A core call's result: its message (which names the sample and what failed)
// under the matching absl code.
inline absl::Status CoreStatus(int code) {
  const char* message = bzna_gpu_last_error();
  switch (code) {
    case BZNA_GPU_OK:
      return absl::OkStatus();
    case BZNA_GPU_INVALID_ARGUMENT:
      return absl::InvalidArgumentError(message);
    case BZNA_GPU_UNAVAILABLE:
      return absl::FailedPreconditionError(message);
    case BZNA_GPU_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

#define BZNA_WARP_HOST_INPUTS \
  HostMemory("output_shape").HostMemory("bias").HostMemory("norm").HostMemory("oob_color")

}  // namespace bzna_tf

#endif  // BZNA_TF_GPU_TF_COMMON_H_
