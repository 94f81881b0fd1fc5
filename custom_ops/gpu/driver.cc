#include "gpu/driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace bzna_tf {
namespace gpu {

// The fatbin of gpu/warp_kernels.cu, written into a generated source file by
// the build (bzna_tf/ops/_build.py).
extern "C" const unsigned char bzna_tf_warp_fatbin[];
extern "C" const uint64_t bzna_tf_warp_fatbin_size;

namespace {

// The grid's z dimension (one sample each) holds at most 65535 blocks.
constexpr int64_t kMaxGridZ = 65535;

absl::StatusOr<const Driver*> LoadDriver() {
  auto* d = new Driver();
  if (cuda_load_functions(&d->cu, nullptr) != 0 || d->cu == nullptr) {
    delete d;
    return absl::FailedPreconditionError(
        "the NVIDIA driver's libcuda.so.1 could not be loaded: this machine has no NVIDIA driver (the GPU "
        "kernels of bzna_tf need one; the CPU kernels do not)");
  }
  d->stream_get_ctx = reinterpret_cast<tcuStreamGetCtx*>(dlsym(d->cu->lib, "cuStreamGetCtx"));
  if (d->stream_get_ctx == nullptr) {
    return absl::FailedPreconditionError("libcuda.so.1 has no cuStreamGetCtx: the NVIDIA driver is too old");
  }
  const CUresult init = d->cu->cuInit(0);
  if (init != CUDA_SUCCESS) {
    const char* name = nullptr;
    d->cu->cuGetErrorName(init, &name);
    return absl::FailedPreconditionError(absl::StrCat("the NVIDIA driver did not initialise (cuInit: ",
                                                      name ? name : "unknown error", ", ",
                                                      static_cast<int>(init), "): no usable GPU"));
  }
  if (cuvid_load_functions(&d->cuvid, nullptr) != 0 || d->cuvid == nullptr) {
    d->cuvid = nullptr;
    d->cuvid_error =
        "the NVIDIA driver's libnvcuvid.so.1 (NVDEC) could not be loaded: install the driver's video "
        "decode library (e.g. libnvidia-decode) or, in a container, expose the 'video' driver capability "
        "(NVIDIA_DRIVER_CAPABILITIES=compute,utility,video)";
  }
  return d;
}

}  // namespace

absl::StatusOr<const Driver*> GetDriver() {
  static const absl::StatusOr<const Driver*>* const driver =
      new absl::StatusOr<const Driver*>(LoadDriver());
  return *driver;
}

absl::Status Check(const Driver& d, CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  d.cu->cuGetErrorName(result, &name);
  d.cu->cuGetErrorString(result, &text);
  return absl::InternalError(absl::StrCat(what, " failed: ", name ? name : "CUDA error", " (",
                                          static_cast<int>(result), "): ", text ? text : ""));
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

absl::StatusOr<CUcontext> StreamContext(const Driver& d, CUstream stream) {
  CUcontext context = nullptr;
  const absl::Status s = Check(d, d.stream_get_ctx(stream, &context), "cuStreamGetCtx");
  if (!s.ok()) return s;
  return context;
}

absl::StatusOr<Kernels> KernelsFor(const Driver& d, CUcontext context) {
  static std::mutex mu;
  static auto* loaded = new std::map<CUcontext, Kernels>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = loaded->find(context);
  if (it != loaded->end()) return it->second;
  CUmodule module = nullptr;
  absl::Status s =
      Check(d, d.cu->cuModuleLoadData(&module, bzna_tf_warp_fatbin), "loading the warp kernels (cuModuleLoadData)");
  if (!s.ok()) return s;
  Kernels k;
  const std::pair<CUfunction*, const char*> wanted[] = {
      {&k.yuv, kWarpYuvKernel}, {&k.rgb_u8, kWarpRgbU8Kernel}, {&k.rgb_f32, kWarpRgbF32Kernel}};
  for (const auto& [fn, name] : wanted) {
    s = Check(d, d.cu->cuModuleGetFunction(fn, module, name), "cuModuleGetFunction");
    if (!s.ok()) return s;
  }
  (*loaded)[context] = k;
  return k;
}

namespace {

absl::Status Launch(const Driver& d, CUfunction fn, CUstream stream, int64_t width, int64_t height,
                    int64_t samples, void* params) {
  const unsigned gx = static_cast<unsigned>((width + kBlockX - 1) / kBlockX);
  const unsigned gy = static_cast<unsigned>((height + kBlockY - 1) / kBlockY);
  void* args[] = {params};
  return Check(d,
               d.cu->cuLaunchKernel(fn, gx, gy, static_cast<unsigned>(samples), kBlockX, kBlockY, 1, 0,
                                    stream, args, nullptr),
               "launching a warp kernel (cuLaunchKernel)");
}

}  // namespace

absl::Status LaunchWarpYuv(const Driver& d, const Kernels& k, CUstream stream, YuvLaunch p,
                           int64_t samples) {
  for (int64_t done = 0; done < samples;) {
    const int64_t count = std::min(kMaxGridZ, samples - done);
    YuvLaunch part = p;
    part.luma.data += done * p.luma_sample_stride;
    part.cb.data += done * p.chroma_sample_stride;
    part.cr.data += done * p.chroma_sample_stride;
    part.first_sample = p.first_sample + done;
    const absl::Status s = Launch(d, k.yuv, stream, p.layout.width, p.layout.height, count, &part);
    if (!s.ok()) return s;
    done += count;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status LaunchWarpRgb(const Driver& d, const Kernels& k, CUstream stream, RgbLaunch<T> p,
                           int64_t samples) {
  const CUfunction fn = sizeof(T) == 1 ? k.rgb_u8 : k.rgb_f32;
  for (int64_t done = 0; done < samples;) {
    const int64_t count = std::min(kMaxGridZ, samples - done);
    RgbLaunch<T> part = p;
    part.first_sample = p.first_sample + done;
    const absl::Status s = Launch(d, fn, stream, p.layout.width, p.layout.height, count, &part);
    if (!s.ok()) return s;
    done += count;
  }
  return absl::OkStatus();
}

template absl::Status LaunchWarpRgb<uint8_t>(const Driver&, const Kernels&, CUstream, RgbLaunch<uint8_t>,
                                             int64_t);
template absl::Status LaunchWarpRgb<float>(const Driver&, const Kernels&, CUstream, RgbLaunch<float>,
                                           int64_t);

}  // namespace gpu
}  // namespace bzna_tf

// For Python (ctypes): why the GPU kernels cannot run on this machine, or
// null when the driver and NVDEC both load. Safe to call without a GPU.
extern "C" const char* bzna_tf_gpu_probe() {
  static const std::string* const message = [] {
    auto driver = bzna_tf::gpu::GetDriver();
    if (!driver.ok()) return new std::string(driver.status().message());
    if ((*driver)->cuvid == nullptr) return new std::string((*driver)->cuvid_error);
    return static_cast<std::string*>(nullptr);
  }();
  return message == nullptr ? nullptr : message->c_str();
}
