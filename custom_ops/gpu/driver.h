// The CUDA driver API and NVDEC (cuvid), opened with dlopen at run time.
//
// Nothing in bzna_tf links libcuda, libcudart or libnvcuvid: the GPU library
// loads on machines without a driver, and its kernels report a clear
// FailedPrecondition there. The declarations come from nv-codec-headers
// (ffnvcodec, Debian's libffmpeg-nvenc-dev), needed at build time only. The
// warp kernels are a fatbin compiled by nvcc and embedded in the library,
// loaded per CUDA context with cuModuleLoadData.

#ifndef BZNA_TF_GPU_DRIVER_H_
#define BZNA_TF_GPU_DRIVER_H_

#include <cstdint>
#include <string>

// The loader reports failures through these; bzna_tf returns its own errors.
#define FFNV_LOG_FUNC(logctx, msg, ...)
#define FFNV_DEBUG_LOG_FUNC(logctx, msg, ...)
#include <ffnvcodec/dynlink_loader.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpu/launch_params.h"

// Returns a non-OK absl::Status from the enclosing function.
#define BZNA_RETURN_IF_ERROR(expr)          \
  do {                                      \
    const absl::Status bzna_status = (expr); \
    if (!bzna_status.ok()) return bzna_status; \
  } while (0)

namespace bzna_tf {
namespace gpu {

// cuStreamGetCtx (CUDA >= 9.2) is not among ffnvcodec's declarations.
typedef CUresult CUDAAPI tcuStreamGetCtx(CUstream stream, CUcontext* context);

struct Driver {
  CudaFunctions* cu = nullptr;
  tcuStreamGetCtx* stream_get_ctx = nullptr;
  CuvidFunctions* cuvid = nullptr;  // null when libnvcuvid.so.1 is missing
  std::string cuvid_error;          // why cuvid is null
};

// The driver, loaded and initialised once per process; FailedPrecondition
// when libcuda.so.1 cannot be opened or cuInit fails.
absl::StatusOr<const Driver*> GetDriver();

// OK, or an Internal error naming `what` and the driver's error.
absl::Status Check(const Driver& d, CUresult result, const char* what);

// Makes a context current on this thread for the scope.
class ScopedContext {
 public:
  ScopedContext(const Driver& d, CUcontext context);
  ~ScopedContext();
  const absl::Status& status() const { return status_; }

 private:
  const Driver& d_;
  bool pushed_ = false;
  absl::Status status_;
};

// The context a stream belongs to.
absl::StatusOr<CUcontext> StreamContext(const Driver& d, CUstream stream);

// The warp kernels of `context`, which must be current (loaded once per
// context).
struct Kernels {
  CUfunction yuv = nullptr;
  CUfunction rgb_u8 = nullptr;
  CUfunction rgb_f32 = nullptr;
};
absl::StatusOr<Kernels> KernelsFor(const Driver& d, CUcontext context);

// Launches on `stream`: `samples` 4:2:0 frames from p.first_sample on, or
// `samples` RGB images. Batches beyond the grid's z limit are split.
absl::Status LaunchWarpYuv(const Driver& d, const Kernels& k, CUstream stream,
                           YuvLaunch p, int64_t samples);
template <typename T>
absl::Status LaunchWarpRgb(const Driver& d, const Kernels& k, CUstream stream,
                           RgbLaunch<T> p, int64_t samples);

}  // namespace gpu
}  // namespace bzna_tf

#endif  // BZNA_TF_GPU_DRIVER_H_
