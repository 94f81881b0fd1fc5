// The CUDA driver API and NVDEC (cuvid), opened with dlopen at run time, and
// the warp kernels loaded per CUDA context.
//
// Nothing links libcuda, libcudart or libnvcuvid: the core loads on machines
// without a driver and says why it cannot run there. The declarations come
// from nv-codec-headers (ffnvcodec, Debian's libffmpeg-nvenc-dev), needed at
// build time only. The kernels (gpu/core/kernels.cu) are compiled ahead of
// time into one cubin per GPU architecture plus PTX, embedded in the library
// (see bzna_tf/ops/_build.py) and loaded with cuModuleLoadData.

#ifndef BZNA_TF_GPU_CORE_DRIVER_H_
#define BZNA_TF_GPU_CORE_DRIVER_H_

#include <cstdint>
#include <string>

// The loader reports failures through these; the core returns its own errors.
#define FFNV_LOG_FUNC(logctx, msg, ...)
#define FFNV_DEBUG_LOG_FUNC(logctx, msg, ...)
#include <ffnvcodec/dynlink_loader.h>

#include "gpu/core/launch_params.h"
#include "gpu/core/status.h"

namespace bzna_tf {
namespace gpu {

// Driver entry points that ffnvcodec does not declare (CUDA >= 9.2).
typedef CUresult CUDAAPI tcuStreamGetCtx(CUstream stream, CUcontext* context);
typedef CUresult CUDAAPI tcuStreamWaitEvent(CUstream stream, CUevent event, unsigned int flags);
typedef CUresult CUDAAPI tcuDriverGetVersion(int* version);

struct Driver {
  CudaFunctions* cu = nullptr;
  tcuStreamGetCtx* stream_get_ctx = nullptr;
  tcuStreamWaitEvent* stream_wait_event = nullptr;
  tcuDriverGetVersion* driver_get_version = nullptr;
  int device_count = 0;
  CuvidFunctions* cuvid = nullptr;  // null when libnvcuvid.so.1 is missing
  std::string cuvid_error;          // why cuvid is null
};

// The driver, loaded and initialised once per process; Unavailable when
// libcuda.so.1 cannot be opened, cuInit fails or there is no GPU.
StatusOr<const Driver*> GetDriver();

// OK, or an error naming `what` and the driver's error (out of memory:
// BZNA_GPU_OUT_OF_MEMORY; otherwise BZNA_GPU_INTERNAL).
Status Check(const Driver& d, CUresult result, const char* what);

// Check for NVDEC's calls on one picture's data (cuvidParseVideoData,
// cuvidDecodePicture): the codes NVDEC gives bad data (CUDA_ERROR_INVALID_VALUE,
// CUDA_ERROR_UNKNOWN) are the picture's, BZNA_GPU_INVALID_ARGUMENT (so
// on_error="skip" can skip it); any other failure is Check's error (the
// driver, context or device: out of memory, a lost context, a faulted GPU).
Status CheckPicture(const Driver& d, CUresult result, const char* what);

// Makes a context current on this thread for the scope.
class ScopedContext {
 public:
  ScopedContext(const Driver& d, CUcontext context);
  ~ScopedContext();
  ScopedContext(const ScopedContext&) = delete;
  ScopedContext& operator=(const ScopedContext&) = delete;
  const Status& status() const { return status_; }

 private:
  const Driver& d_;
  bool pushed_ = false;
  Status status_;
};

// The context to work in: `stream`'s when it is not null, else the primary
// context of device ordinal `device` (retained once, kept for the process).
StatusOr<CUcontext> ResolveContext(const Driver& d, int device, CUstream stream);

// The kernels of `context`, which must be current (loaded once per context).
struct Kernels {
  CUfunction yuv = nullptr;
  CUfunction rgb_u8 = nullptr;
  CUfunction rgb_f32 = nullptr;
  CUfunction nv12_planes = nullptr;
  std::string image;  // which embedded image was loaded: "sm_90", "ptx (JIT for sm_100)", ...
};
StatusOr<Kernels> KernelsFor(const Driver& d, CUcontext context);

// The (major, minor) compute capability of the current context's device.
Status CurrentComputeCapability(const Driver& d, int* major, int* minor, CUdevice* device);

// Launches on `stream` (split beyond the grid's z limit): `samples` 4:2:0
// frames from p.first_sample on; `samples` RGB images; one NV12 frame copied
// to planar slots.
Status LaunchWarpYuv(const Driver& d, const Kernels& k, CUstream stream, YuvLaunch p, int64_t samples);
Status LaunchWarpRgb(const Driver& d, const Kernels& k, CUstream stream, RgbLaunch p, int64_t samples,
                     bool is_float);
Status LaunchNv12ToPlanes(const Driver& d, const Kernels& k, CUstream stream, const Nv12Copy& p);

// A CUDA event that the host waits on without spinning (blocking sync), so
// waiting for the GPU costs no CPU time.
class Event {
 public:
  explicit Event(const Driver& d) : d_(d) {}
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Status Record(CUstream stream);
  Status Synchronize();
  // Makes `stream` wait (on the GPU) for the last Record.
  Status MakeWait(CUstream stream);

 private:
  const Driver& d_;
  CUevent event_ = nullptr;
};

}  // namespace gpu
}  // namespace bzna_tf

#endif  // BZNA_TF_GPU_CORE_DRIVER_H_
