// GPU kernels of BznaWarpYuv420 and BznaWarpRgb (the ops are registered by the
// CPU library, ops/warp_ops.cc): they need CUDA, not NVDEC. They enqueue the
// core's warp on TensorFlow's compute stream of the op's GPU and write
// outputs TensorFlow allocated there. Small vectors (output_shape, bias,
// norm, oob_color) are host memory; images, planes and matrices device memory.

#include <cstdint>

#include "gpu/core/bzna_gpu.h"
#include "gpu/tf_common.h"
#include "kernels/warp_common.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/types.h"

namespace bzna_tf {
namespace {

using ::tensorflow::DEVICE_GPU;

class WarpYuv420GpuOp : public WarpYuv420OpBase {
 public:
  explicit WarpYuv420GpuOp(OpKernelConstruction* ctx) : WarpYuv420OpBase(ctx) {}

 private:
  void Warp(OpKernelContext* ctx, const Tensor& y, const Tensor& cb, const Tensor& cr, const WarpArgs& args,
            Tensor* output) override {
    const int64_t batch = y.dim_size(0);
    void* stream = nullptr;
    OP_REQUIRES_OK(ctx, OpStream(ctx, &stream));
    const bzna_gpu_warp_params p = CoreParams(args, Layout(args));
    OP_REQUIRES_OK(ctx, CoreStatus(bzna_gpu_warp_yuv420(
                            -1, stream, y.flat<uint8_t>().data(), cb.flat<uint8_t>().data(),
                            cr.flat<uint8_t>().data(), batch, static_cast<int32_t>(y.dim_size(1)),
                            static_cast<int32_t>(y.dim_size(2)), args.matrices, args.broadcast_matrix ? 1 : batch,
                            &p, output->flat<float>().data())));
  }
};

template <typename T>
class WarpRgbGpuOp : public WarpRgbOpBase {
 public:
  explicit WarpRgbGpuOp(OpKernelConstruction* ctx) : WarpRgbOpBase(ctx) {}

 private:
  void Warp(OpKernelContext* ctx, const Tensor& images, const WarpArgs& args, Tensor* output) override {
    const int64_t batch = images.dim_size(0);
    void* stream = nullptr;
    OP_REQUIRES_OK(ctx, OpStream(ctx, &stream));
    const bzna_gpu_warp_params p = CoreParams(args, Layout(args));
    const int32_t dtype = sizeof(T) == 1 ? BZNA_GPU_UINT8 : BZNA_GPU_FLOAT32;
    OP_REQUIRES_OK(ctx, CoreStatus(bzna_gpu_warp_rgb(
                            -1, stream, images.flat<T>().data(), dtype, batch,
                            static_cast<int32_t>(images.dim_size(1)), static_cast<int32_t>(images.dim_size(2)),
                            args.matrices, args.broadcast_matrix ? 1 : batch, &p, output->flat<float>().data())));
  }
};

REGISTER_KERNEL_BUILDER(Name("BznaWarpYuv420").Device(DEVICE_GPU).BZNA_WARP_HOST_INPUTS, WarpYuv420GpuOp);
REGISTER_KERNEL_BUILDER(
    Name("BznaWarpRgb").Device(DEVICE_GPU).TypeConstraint<uint8_t>(warp::kTypeAttr).BZNA_WARP_HOST_INPUTS,
    WarpRgbGpuOp<uint8_t>);
REGISTER_KERNEL_BUILDER(
    Name("BznaWarpRgb").Device(DEVICE_GPU).TypeConstraint<float>(warp::kTypeAttr).BZNA_WARP_HOST_INPUTS,
    WarpRgbGpuOp<float>);

}  // namespace
}  // namespace bzna_tf
