// GPU kernels of BznaWarpYuv420, BznaWarpRgb and BznaDecodeWarp (the ops are
// registered by the CPU library, ops/warp_ops.cc). They run on TensorFlow's
// compute stream of the op's GPU, write outputs TensorFlow allocated there,
// and reach the driver only through gpu/driver.h (dlopen). Scalars and small
// vectors (output_shape, bias, norm, oob_color) and the pictures' bytes are
// host memory; images, planes and matrices are device memory.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gpu/driver.h"
#include "gpu/launch_params.h"
#include "gpu/nvdec.h"
#include "kernels/warp_common.h"
#include "lib/warp.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/types.h"
#include "xla/stream_executor/stream.h"

namespace bzna_tf {
namespace {

using ::tensorflow::DEVICE_GPU;

// The driver, the CUDA context of the op's stream (made current for the
// scope of the kernel) and the warp kernels.
struct GpuScope {
  const gpu::Driver* driver = nullptr;
  CUstream stream = nullptr;
  CUcontext context = nullptr;
  gpu::Kernels kernels;
};

absl::Status Enter(OpKernelContext* ctx, GpuScope* g) {
  auto driver = gpu::GetDriver();
  if (!driver.ok()) return driver.status();
  g->driver = *driver;
  auto* device_context = ctx->op_device_context();
  if (device_context == nullptr || device_context->stream() == nullptr) {
    return absl::InternalError("bzna_tf's GPU kernel ran without a GPU stream");
  }
  g->stream = static_cast<CUstream>(device_context->stream()->platform_specific_handle().stream);
  auto context = gpu::StreamContext(*g->driver, g->stream);
  if (!context.ok()) return context.status();
  g->context = *context;
  return absl::OkStatus();
}

// Runs `body` with the stream's context current and the kernels loaded.
template <typename F>
absl::Status WithContext(OpKernelContext* ctx, F body) {
  GpuScope g;
  BZNA_RETURN_IF_ERROR(Enter(ctx, &g));
  gpu::ScopedContext current(*g.driver, g.context);
  BZNA_RETURN_IF_ERROR(current.status());
  auto kernels = gpu::KernelsFor(*g.driver, g.context);
  if (!kernels.ok()) return kernels.status();
  g.kernels = *kernels;
  return body(g);
}

gpu::YuvLaunch YuvArgs(const WarpArgs& args, const warp::OutputLayout& layout, float* out) {
  gpu::YuvLaunch p;
  p.matrices = args.matrices;
  p.broadcast_matrix = args.broadcast_matrix ? 1 : 0;
  p.first_sample = 0;
  p.color = args.color;
  p.layout = layout;
  p.out = out;
  return p;
}

class WarpYuv420GpuOp : public WarpOpBase {
 public:
  explicit WarpYuv420GpuOp(OpKernelConstruction* ctx) : WarpOpBase(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& y = ctx->input(0);
    const Tensor& cb = ctx->input(1);
    const Tensor& cr = ctx->input(2);
    OP_REQUIRES_OK(ctx, CheckYuvPlanes(y, cb, cr));
    const int64_t batch = y.dim_size(0), height = y.dim_size(1), width = y.dim_size(2);
    const int64_t chroma_height = (height + 1) / 2, chroma_width = (width + 1) / 2;
    WarpArgs args;
    Tensor* output = nullptr;
    if (!PrepareWarp(ctx, 3, batch, &args, &output)) return;
    gpu::YuvLaunch p = YuvArgs(args, Layout(args), output->flat<float>().data());
    p.luma = {y.flat<uint8_t>().data(), static_cast<int>(width), static_cast<int>(height), width, 1};
    p.cb = {cb.flat<uint8_t>().data(), static_cast<int>(chroma_width), static_cast<int>(chroma_height),
            chroma_width, 1};
    p.cr = {cr.flat<uint8_t>().data(), static_cast<int>(chroma_width), static_cast<int>(chroma_height),
            chroma_width, 1};
    p.luma_sample_stride = height * width;
    p.chroma_sample_stride = chroma_height * chroma_width;
    OP_REQUIRES_OK(ctx, WithContext(ctx, [&](const GpuScope& g) {
                     return gpu::LaunchWarpYuv(*g.driver, g.kernels, g.stream, p, batch);
                   }));
  }
};

template <typename T>
class WarpRgbGpuOp : public WarpOpBase {
 public:
  explicit WarpRgbGpuOp(OpKernelConstruction* ctx) : WarpOpBase(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& images = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckRgbImages(images));
    const int64_t batch = images.dim_size(0);
    WarpArgs args;
    Tensor* output = nullptr;
    if (!PrepareWarp(ctx, 1, batch, &args, &output)) return;
    gpu::RgbLaunch<T> p;
    p.images = images.flat<T>().data();
    p.width = static_cast<int>(images.dim_size(2));
    p.height = static_cast<int>(images.dim_size(1));
    p.matrices = args.matrices;
    p.broadcast_matrix = args.broadcast_matrix ? 1 : 0;
    p.first_sample = 0;
    p.color = args.color;
    p.layout = Layout(args);
    p.out = output->flat<float>().data();
    OP_REQUIRES_OK(ctx, WithContext(ctx, [&](const GpuScope& g) {
                     return gpu::LaunchWarpRgb<T>(*g.driver, g.kernels, g.stream, p, batch);
                   }));
  }
};

// NVDEC decodes each picture into a mapped NV12 surface and the YUV kernel
// warps it straight into the batch's output (NV12: CbCr interleaved, so the
// chroma planes are the same bytes with column stride 2, Cr one byte on).
class DecodeWarpGpuOp : public WarpOpBase {
 public:
  explicit DecodeWarpGpuOp(OpKernelConstruction* ctx) : WarpOpBase(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& data = ctx->input(0);
    OP_REQUIRES_OK(ctx, CheckPictures(data));
    const int64_t batch = data.dim_size(0);
    WarpArgs args;
    Tensor* output = nullptr;
    if (!PrepareWarp(ctx, 1, batch, &args, &output)) return;
    const auto pictures = data.flat<tensorflow::tstring>();
    const gpu::YuvLaunch base = YuvArgs(args, Layout(args), output->flat<float>().data());
    OP_REQUIRES_OK(ctx, WithContext(ctx, [&](const GpuScope& g) -> absl::Status {
                     auto decoder = gpu::NvdecDecoder::ForContext(*g.driver, g.context);
                     if (!decoder.ok()) return decoder.status();
                     std::lock_guard<std::mutex> lock((*decoder)->mutex());
                     for (int64_t n = 0; n < batch; ++n) {
                       const absl::Status s = (*decoder)->Decode(
                           pictures(n), g.stream, [&](const gpu::NvdecFrame& f) -> absl::Status {
                             BZNA_RETURN_IF_ERROR(CheckSide("a decoded frame height", f.height));
                             BZNA_RETURN_IF_ERROR(CheckSide("a decoded frame width", f.width));
                             gpu::YuvLaunch p = base;
                             const auto* luma = reinterpret_cast<const uint8_t*>(f.luma);
                             const auto* chroma = reinterpret_cast<const uint8_t*>(f.chroma);
                             const int cw = (f.width + 1) / 2, ch = (f.height + 1) / 2;
                             p.luma = {luma, f.width, f.height, f.pitch, 1};
                             p.cb = {chroma, cw, ch, f.pitch, 2};
                             p.cr = {chroma + 1, cw, ch, f.pitch, 2};
                             p.luma_sample_stride = 0;
                             p.chroma_sample_stride = 0;
                             p.first_sample = n;
                             return gpu::LaunchWarpYuv(*g.driver, g.kernels, g.stream, p, 1);
                           });
                       if (!s.ok()) {
                         return absl::Status(s.code(), absl::StrCat("sample ", n, " of the batch: ", s.message()));
                       }
                     }
                     return absl::OkStatus();
                   }));
  }
};

#define BZNA_WARP_HOST_INPUTS \
  HostMemory("output_shape").HostMemory("bias").HostMemory("norm").HostMemory("oob_color")

REGISTER_KERNEL_BUILDER(Name("BznaWarpYuv420").Device(DEVICE_GPU).BZNA_WARP_HOST_INPUTS, WarpYuv420GpuOp);
REGISTER_KERNEL_BUILDER(
    Name("BznaWarpRgb").Device(DEVICE_GPU).TypeConstraint<uint8_t>(warp::kTypeAttr).BZNA_WARP_HOST_INPUTS,
    WarpRgbGpuOp<uint8_t>);
REGISTER_KERNEL_BUILDER(
    Name("BznaWarpRgb").Device(DEVICE_GPU).TypeConstraint<float>(warp::kTypeAttr).BZNA_WARP_HOST_INPUTS,
    WarpRgbGpuOp<float>);
REGISTER_KERNEL_BUILDER(Name("BznaDecodeWarp").Device(DEVICE_GPU).HostMemory("data").BZNA_WARP_HOST_INPUTS,
                        DecodeWarpGpuOp);

}  // namespace
}  // namespace bzna_tf
