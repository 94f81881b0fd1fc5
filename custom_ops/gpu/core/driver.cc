#include "gpu/core/driver.h"

#include "gpu/core/kernel_images.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>

namespace bzna_tf {
namespace gpu {

using KernelImage = bzna_tf_kernel_image;

namespace {

// CUDA_ERROR_OUT_OF_MEMORY (ffnvcodec does not name it).
constexpr int kCudaErrorOutOfMemory = 2;

// The CUresult values that an NVDEC call on one picture returns for bad data:
// CUDA_ERROR_INVALID_VALUE (corrupt H.265 from cuvidDecodePicture,
// NVIDIA/VideoProcessingFramework#125) and CUDA_ERROR_UNKNOWN (the parser on
// bad data, rigaya/NVEnc#373). Any other failure is the driver's, the
// context's or the device's, and stays internal: never skipped as one
// picture's, since every picture would then be skipped.
bool PictureFailure(CUresult result) {
  switch (static_cast<int>(result)) {
    case 1:    // CUDA_ERROR_INVALID_VALUE
    case 999:  // CUDA_ERROR_UNKNOWN
      return true;
    default:
      return false;
  }
}

// The grid's z dimension (one sample each) holds at most 65535 blocks.
constexpr int64_t kMaxGridZ = 65535;

StatusOr<const Driver*> LoadDriver() {
  auto* d = new Driver();
  if (cuda_load_functions(&d->cu, nullptr) != 0 || d->cu == nullptr) {
    return Unavailable(
        "the NVIDIA driver's libcuda.so.1 could not be loaded: this machine has no NVIDIA driver (the GPU "
        "kernels of bzna_tf need one; the CPU kernels do not)");
  }
  d->stream_get_ctx = reinterpret_cast<tcuStreamGetCtx*>(dlsym(d->cu->lib, "cuStreamGetCtx"));
  d->stream_wait_event = reinterpret_cast<tcuStreamWaitEvent*>(dlsym(d->cu->lib, "cuStreamWaitEvent"));
  d->driver_get_version = reinterpret_cast<tcuDriverGetVersion*>(dlsym(d->cu->lib, "cuDriverGetVersion"));
  if (d->stream_get_ctx == nullptr || d->stream_wait_event == nullptr) {
    return Unavailable("libcuda.so.1 has no cuStreamGetCtx or cuStreamWaitEvent: the NVIDIA driver is too old");
  }
  const CUresult init = d->cu->cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    d->cu->cuGetErrorName(init, &name);
    return Unavailable("the NVIDIA driver did not initialise (cuInit: ", name ? name : "unknown error", ", ",
                       static_cast<int>(init), "): no usable GPU");
  }
  if (d->cu->cuDeviceGetCount(&d->device_count) != CUDA_SUCCESS || d->device_count <= 0) {
    return Unavailable("the NVIDIA driver sees no GPU (cuDeviceGetCount)");
  }
  if (cuvid_load_functions(&d->cuvid, nullptr) != 0 || d->cuvid == nullptr) {
    d->cuvid = nullptr;
    d->cuvid_error =
        "the NVIDIA driver's libnvcuvid.so.1 (NVDEC) could not be loaded: install the driver's video "
        "decode library (e.g. libnvidia-decode) or, in a container, expose the 'video' driver capability "
        "(NVIDIA_DRIVER_CAPABILITIES=compute,utility,video)";
  }
  return static_cast<const Driver*>(d);
}

const char* ErrorName(const Driver& d, CUresult result) {
  const char* name = nullptr;
  d.cu->cuGetErrorName(result, &name);
  return name ? name : "CUDA error";
}

}  // namespace

StatusOr<const Driver*> GetDriver() {
  static const StatusOr<const Driver*>* const driver = new StatusOr<const Driver*>(LoadDriver());
  return *driver;
}

Status Check(const Driver& d, CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return Status();
  const char* text = nullptr;
  d.cu->cuGetErrorString(result, &text);
  const int code = static_cast<int>(result) == kCudaErrorOutOfMemory ? BZNA_GPU_OUT_OF_MEMORY : BZNA_GPU_INTERNAL;
  return Status(code, Cat(what, " failed: ", ErrorName(d, result), " (", static_cast<int>(result),
                          "): ", text ? text : ""));
}

Status CheckPicture(const Driver& d, CUresult result, const char* what) {
  if (result == CUDA_SUCCESS || !PictureFailure(result)) return Check(d, result, what);
  const char* text = nullptr;
  d.cu->cuGetErrorString(result, &text);
  return InvalidArgument("NVDEC could not decode the picture (corrupt H.265 data? ", what, ": ",
                         ErrorName(d, result), " (", static_cast<int>(result), "): ", text ? text : "", ")");
}

ScopedContext::ScopedContext(const Driver& d, CUcontext context) : d_(d) {
  status_ = Check(d, d.cu->cuCtxPushCurrent(context), "cuCtxPushCurrent");
  pushed_ = status_.ok();
}

ScopedContext::~ScopedContext() {
  if (pushed_) {
    CUcontext unused;
    d_.cu->cuCtxPopCurrent(&unused);
  }
}

StatusOr<CUcontext> ResolveContext(const Driver& d, int device, CUstream stream) {
  CUcontext context = nullptr;
  // CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) belong to no context
  // (cuStreamGetCtx would answer the thread's current one): use the device's.
  if (reinterpret_cast<uintptr_t>(stream) > 2) {
    BZNA_GPU_RETURN_IF_ERROR(Check(d, d.stream_get_ctx(stream, &context), "cuStreamGetCtx"));
    return context;
  }
  if (device < 0 || device >= d.device_count) {
    return InvalidArgument("expected a CUDA device ordinal in [0, ", d.device_count, "). Received ", device);
  }
  static std::mutex mu;
  static auto* primary = new std::map<int, CUcontext>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = primary->find(device);
  if (it != primary->end()) return it->second;
  CUdevice dev;
  BZNA_GPU_RETURN_IF_ERROR(Check(d, d.cu->cuDeviceGet(&dev, device), "cuDeviceGet"));
  BZNA_GPU_RETURN_IF_ERROR(
      Check(d, d.cu->cuDevicePrimaryCtxRetain(&context, dev), "retaining the GPU's primary context"));
  (*primary)[device] = context;  // kept for the process, like the CUDA runtime does
  return context;
}

Status CurrentComputeCapability(const Driver& d, int* major, int* minor, CUdevice* device) {
  BZNA_GPU_RETURN_IF_ERROR(Check(d, d.cu->cuCtxGetDevice(device), "cuCtxGetDevice"));
  return Check(d, d.cu->cuDeviceComputeCapability(major, minor, *device), "cuDeviceComputeCapability");
}

namespace {

// The embedded images to try for a GPU of compute capability `arch`, best
// first: its own cubin, else the newest cubin of the same major version not
// newer than it (binary compatible), then the PTX.
std::vector<const KernelImage*> Candidates(int arch) {
  const KernelImage* exact = nullptr;
  const KernelImage* family = nullptr;
  const KernelImage* ptx = nullptr;
  for (int i = 0; i < bzna_tf_kernel_image_count; ++i) {
    const KernelImage* im = &bzna_tf_kernel_images[i];
    if (im->arch == 0) {
      ptx = im;
    } else if (im->arch == arch) {
      exact = im;
    } else if (im->arch / 10 == arch / 10 && im->arch < arch && (family == nullptr || im->arch > family->arch)) {
      family = im;
    }
  }
  std::vector<const KernelImage*> out;
  for (const KernelImage* im : {exact, family, ptx}) {
    if (im != nullptr) out.push_back(im);
  }
  return out;
}

std::string BuiltFor() {
  std::string s;
  for (int i = 0; i < bzna_tf_kernel_image_count; ++i) {
    const int a = bzna_tf_kernel_images[i].arch;
    s += (s.empty() ? "" : ", ") + (a == 0 ? std::string("PTX") : Cat("sm_", a));
  }
  return s;
}

}  // namespace

StatusOr<Kernels> KernelsFor(const Driver& d, CUcontext context) {
  static std::mutex mu;
  static auto* loaded = new std::map<CUcontext, Kernels>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(context);
  if (it != loaded->end()) return it->second;
  int major = 0, minor = 0;
  CUdevice device;
  BZNA_GPU_RETURN_IF_ERROR(CurrentComputeCapability(d, &major, &minor, &device));
  const int arch = major * 10 + minor;
  CUmodule module = nullptr;
  Kernels k;
  int driver_version = 0;
  if (d.driver_get_version != nullptr) d.driver_get_version(&driver_version);
  Status last = Unavailable("bzna_tf's GPU kernels were built for ", BuiltFor(), ", none of which runs on sm_",
                            arch, ": rebuild with an nvcc that supports this GPU");
  for (const KernelImage* im : Candidates(arch)) {
    const Status s = Check(d, d.cu->cuModuleLoadData(&module, im->data), "loading the kernels (cuModuleLoadData)");
    if (s.ok()) {
      k.image = im->arch == 0 ? Cat("ptx (JIT for sm_", arch, ")") : Cat("sm_", im->arch);
      last = Status();
      break;
    }
    last = s.Prefixed(im->arch == 0 ? "PTX: " : Cat("sm_", im->arch, " cubin: "));
  }
  // The usual cause: kernels from a newer CUDA than the driver (build.json / core.json say which).
  BZNA_GPU_RETURN_IF_ERROR(last.Prefixed(Cat("the driver supports CUDA ", driver_version / 1000, ".",
                                             driver_version % 1000 / 10, "; ")));
  const std::pair<CUfunction*, const char*> wanted[] = {{&k.yuv, kWarpYuvKernel},
                                                        {&k.rgb_u8, kWarpRgbU8Kernel},
                                                        {&k.rgb_f32, kWarpRgbF32Kernel},
                                                        {&k.nv12_planes, kNv12PlanesKernel}};
  for (const auto& [fn, name] : wanted) {
    BZNA_GPU_RETURN_IF_ERROR(Check(d, d.cu->cuModuleGetFunction(fn, module, name), "cuModuleGetFunction"));
  }
  (*loaded)[context] = k;
  return k;
}

namespace {

Status Launch(const Driver& d, CUfunction fn, CUstream stream, int64_t width, int64_t height, int64_t depth,
              void* params) {
  const unsigned gx = static_cast<unsigned>((width + kBlockX - 1) / kBlockX);
  const unsigned gy = static_cast<unsigned>((height + kBlockY - 1) / kBlockY);
  void* args[] = {params};
  return Check(d,
               d.cu->cuLaunchKernel(fn, gx, gy, static_cast<unsigned>(depth), kBlockX, kBlockY, 1, 0, stream,
                                    args, nullptr),
               "launching a kernel (cuLaunchKernel)");
}

}  // namespace

Status LaunchWarpYuv(const Driver& d, const Kernels& k, CUstream stream, YuvLaunch p, int64_t samples) {
  for (int64_t done = 0; done < samples;) {
    const int64_t count = std::min(kMaxGridZ, samples - done);
    YuvLaunch part = p;
    part.luma.data += done * p.luma_sample_stride;
    part.cb.data += done * p.chroma_sample_stride;
    part.cr.data += done * p.chroma_sample_stride;
    part.first_sample = p.first_sample + done;
    BZNA_GPU_RETURN_IF_ERROR(Launch(d, k.yuv, stream, p.layout.width, p.layout.height, count, &part));
    done += count;
  }
  return Status();
}

Status LaunchWarpRgb(const Driver& d, const Kernels& k, CUstream stream, RgbLaunch p, int64_t samples,
                     bool is_float) {
  for (int64_t done = 0; done < samples;) {
    const int64_t count = std::min(kMaxGridZ, samples - done);
    RgbLaunch part = p;
    part.first_sample = p.first_sample + done;
    BZNA_GPU_RETURN_IF_ERROR(
        Launch(d, is_float ? k.rgb_f32 : k.rgb_u8, stream, p.layout.width, p.layout.height, count, &part));
    done += count;
  }
  return Status();
}

Status LaunchNv12ToPlanes(const Driver& d, const Kernels& k, CUstream stream, const Nv12Copy& p) {
  Nv12Copy copy = p;
  return Launch(d, k.nv12_planes, stream, (p.width + 1) / 2, (p.height + 1) / 2, 1, &copy);
}

Event::~Event() {
  if (event_ != nullptr) d_.cu->cuEventDestroy(event_);
}

Status Event::Record(CUstream stream) {
  if (event_ == nullptr) {
    BZNA_GPU_RETURN_IF_ERROR(Check(d_, d_.cu->cuEventCreate(&event_, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING),
                                   "cuEventCreate"));
  }
  return Check(d_, d_.cu->cuEventRecord(event_, stream), "cuEventRecord");
}

Status Event::Synchronize() {
  if (event_ == nullptr) return Status();
  return Check(d_, d_.cu->cuEventSynchronize(event_), "waiting for the GPU (cuEventSynchronize)");
}

Status Event::MakeWait(CUstream stream) {
  if (event_ == nullptr) return Status();
  return Check(d_, d_.stream_wait_event(stream, event_, 0), "cuStreamWaitEvent");
}

}  // namespace gpu
}  // namespace bzna_tf
