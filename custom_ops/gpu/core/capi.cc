// The C ABI of bzna_gpu.h: argument checks (first, so they need no GPU),
// then the context, the kernels and the work.

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/core/bzna_gpu.h"
#include "gpu/core/calls.h"
#include "gpu/core/driver.h"
#include "gpu/core/nvdec.h"
#include "gpu/core/status.h"

namespace bzna_tf {
namespace gpu {
namespace {

// Largest image side: every pixel index must be exact in float32 (2^24).
constexpr int64_t kMaxSide = int64_t{1} << 24;

thread_local std::string g_last_error;

}  // namespace

int Finish(const Status& s) {
  if (s.ok()) {
    g_last_error.clear();
    return BZNA_GPU_OK;
  }
  g_last_error = s.message();
  return s.code();
}

namespace {

Status CheckSide(const char* what, int64_t size) {
  if (size < 1 || size > kMaxSide) {
    return InvalidArgument("expected ", what, " in [1, ", kMaxSide, "]. Received ", size);
  }
  return Status();
}

}  // namespace

Status CheckParams(const bzna_gpu_warp_params* p) {
  if (p == nullptr) return InvalidArgument("expected warp params. Received a null pointer");
  BZNA_GPU_RETURN_IF_ERROR(CheckSide("an output height", p->out_height));
  // The launch grid's y dimension (65535 blocks of kBlockY rows).
  if (p->out_height > int64_t{65535} * kBlockY) {
    return InvalidArgument("expected an output height of at most ", int64_t{65535} * kBlockY,
                           " on the GPU. Received ", p->out_height);
  }
  BZNA_GPU_RETURN_IF_ERROR(CheckSide("an output width", p->out_width));
  if (p->channels_first != 0 && p->channels_first != 1) {
    return InvalidArgument("expected channels_first 0 or 1. Received ", p->channels_first);
  }
  if (p->antialias != 0 && p->antialias != 1) {
    return InvalidArgument("expected antialias 0 or 1. Received ", p->antialias);
  }
  return Status();
}

namespace {

Status CheckCount(int64_t count) {
  if (count < 0) return InvalidArgument("expected a sample count >= 0. Received ", count);
  return Status();
}

}  // namespace

Status CheckMatrices(const float* matrices, int64_t matrix_count, int64_t count) {
  if (count > 0 && matrix_count != 1 && matrix_count != count) {
    return InvalidArgument("expected matrix_count 1 or ", count, " (the sample count). Received ", matrix_count);
  }
  if (count > 0 && matrices == nullptr) return InvalidArgument("expected matrices. Received a null pointer");
  return Status();
}

namespace {

Status CheckPointer(const void* p, int64_t count, const char* what) {
  if (count > 0 && p == nullptr) return InvalidArgument("expected ", what, ". Received a null pointer");
  return Status();
}

}  // namespace

Status CheckPictures(const uint8_t* const* pictures, const uint64_t* sizes, int64_t count, bool allow_empty) {
  BZNA_GPU_RETURN_IF_ERROR(CheckCount(count));
  BZNA_GPU_RETURN_IF_ERROR(CheckPointer(pictures, count, "pictures"));
  BZNA_GPU_RETURN_IF_ERROR(CheckPointer(sizes, count, "picture sizes"));
  for (int64_t n = 0; n < count; ++n) {
    if (allow_empty && sizes[n] == 0) continue;  // not read: the queue makes it this sample's failure
    if (pictures[n] == nullptr || sizes[n] == 0) {
      return InvalidArgument("sample ", n, " of the batch: expected an H.265 picture. Received ",
                             pictures[n] == nullptr ? "a null pointer" : "0 bytes");
    }
    if (sizes[n] > (uint64_t{1} << 31)) {
      return InvalidArgument("sample ", n, " of the batch: expected a picture of at most 2 GiB. Received ",
                             sizes[n], " bytes");
    }
  }
  return Status();
}

// Each picture's (height, width), when given: at least 1 each (the frames'
// sizes, known once decoded, are checked by DecodeWarp).
Status CheckPictureSizes(const int32_t* picture_sizes, int64_t count) {
  if (picture_sizes == nullptr) return Status();
  for (int64_t n = 0; n < count; ++n) {
    const int32_t h = picture_sizes[2 * n], w = picture_sizes[2 * n + 1];
    if (h < 1 || w < 1) {
      return InvalidArgument("sample ", n, " of the batch: expected a picture size (height, width) of at least ",
                             "[1, 1]. Received [", h, ", ", w, "]");
    }
  }
  return Status();
}

namespace {

warp::ColorTransform Color(const bzna_gpu_warp_params& p) {
  warp::ColorTransform c;
  for (int i = 0; i < 3; ++i) {
    c.bias[i] = p.bias[i];
    c.norm[i] = p.norm[i];
    c.oob[i] = p.oob[i];
  }
  return c;
}

warp::OutputLayout Layout(const bzna_gpu_warp_params& p) {
  warp::OutputLayout l;
  l.height = p.out_height;
  l.width = p.out_width;
  l.channels_first = p.channels_first != 0;
  return l;
}

}  // namespace

int64_t OutputElements(const bzna_gpu_warp_params& p, int64_t count) {
  return count * 3 * static_cast<int64_t>(p.out_height) * p.out_width;
}

namespace {

// Runs body(gpu) with the context of `stream` (or `device`'s primary one)
// current and the kernels loaded.
template <typename F>
Status WithGpu(int device, CUstream stream, F body) {
  auto d = GetDriver();
  if (!d.ok()) return d.status();
  auto context = ResolveContext(**d, device, stream);
  if (!context.ok()) return context.status();
  ScopedContext current(**d, *context);
  BZNA_GPU_RETURN_IF_ERROR(current.status());
  auto kernels = KernelsFor(**d, *context);
  if (!kernels.ok()) return kernels.status();
  Gpu g{*d, *context, *kernels};
  return body(g);
}

// Warp-only work without a caller's stream runs on the context's default
// stream and is waited for.
Status Wait(const Gpu& g, CUstream stream) {
  if (stream != nullptr) return Status();
  Event done(*g.d);
  BZNA_GPU_RETURN_IF_ERROR(done.Record(nullptr));
  return done.Synchronize();
}

// Device memory freed with the scope (the context must still be current).
class DeviceBuffer {
 public:
  explicit DeviceBuffer(const Driver& d) : d_(d) {}
  ~DeviceBuffer() {
    if (ptr_ != 0) d_.cu->cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  Status Allocate(uint64_t bytes) {
    if (bytes == 0) return Status();
    return Check(d_, d_.cu->cuMemAlloc(&ptr_, bytes), "allocating GPU memory (cuMemAlloc)");
  }
  Status Upload(const void* host, uint64_t bytes) {
    BZNA_GPU_RETURN_IF_ERROR(Allocate(bytes));
    if (bytes == 0) return Status();
    return Check(d_, d_.cu->cuMemcpyHtoD(ptr_, host, bytes), "copying to the GPU (cuMemcpyHtoD)");
  }
  Status Download(void* host, uint64_t bytes) const {
    if (bytes == 0) return Status();
    return Check(d_, d_.cu->cuMemcpyDtoH(host, ptr_, bytes), "copying from the GPU (cuMemcpyDtoH)");
  }
  template <typename T>
  T* get() const {
    return reinterpret_cast<T*>(ptr_);
  }

 private:
  const Driver& d_;
  CUdeviceptr ptr_ = 0;
};

// A YuvLaunch or RgbLaunch with the fields both have set; the source's are zero.
template <typename Launch>
Launch BaseLaunch(const float* matrices, int64_t matrix_count, const bzna_gpu_warp_params& p, float* out) {
  Launch q;
  std::memset(&q, 0, sizeof(q));
  q.matrices = matrices;
  q.broadcast_matrix = matrix_count == 1 ? 1 : 0;
  q.first_sample = 0;
  q.color = Color(p);
  q.layout = Layout(p);
  q.antialias = p.antialias;
  q.out = out;
  return q;
}

}  // namespace

Status DecodeWarp(const Gpu& g, CUstream stream, const uint8_t* const* pictures, const uint64_t* sizes,
                  int64_t count, const float* matrices, int64_t matrix_count, const int32_t* picture_sizes,
                  const bzna_gpu_warp_params& p, float* out) {
  auto pool = NvdecPool::ForContext(*g.d, g.context);
  if (!pool.ok()) return pool.status();
  const YuvLaunch base = BaseLaunch<YuvLaunch>(matrices, matrix_count, p, out);
  // The mapped NV12 surface is warped where it lies: the chroma "planes" are
  // the interleaved CbCr bytes with column stride 2, Cr one byte on. The
  // planes are the picture's, at the frame's top-left: the warp bounds and
  // clamps by their sizes, so the frame's padding is never read.
  const FrameSink sink = [&](int64_t n, const NvdecFrame& f, CUstream s) -> Status {
    BZNA_GPU_RETURN_IF_ERROR(CheckSide("a decoded frame height", f.height));
    BZNA_GPU_RETURN_IF_ERROR(CheckSide("a decoded frame width", f.width));
    int height = f.height, width = f.width;
    if (picture_sizes != nullptr) {
      height = picture_sizes[2 * n];
      width = picture_sizes[2 * n + 1];
      if (height < 1 || width < 1 || height > f.height || width > f.width) {
        return InvalidArgument("expected a picture size (height, width) of at least [1, 1] and at most the "
                               "decoded frame's [",
                               f.height, ", ", f.width, "]. Received [", height, ", ", width, "]");
      }
    }
    YuvLaunch q = base;
    const auto* luma = reinterpret_cast<const uint8_t*>(f.luma);
    const auto* chroma = reinterpret_cast<const uint8_t*>(f.chroma);
    const int cw = (width + 1) / 2, ch = (height + 1) / 2;
    q.luma = {luma, width, height, f.pitch, 1};
    q.cb = {chroma, cw, ch, f.pitch, 2};
    q.cr = {chroma + 1, cw, ch, f.pitch, 2};
    q.first_sample = n;
    return LaunchWarpYuv(*g.d, g.kernels, s, q, 1);
  };
  return (*pool)->DecodeBatch(pictures, sizes, count, stream, sink);
}

Status FillOob(const Gpu& g, CUstream stream, int64_t count, const bzna_gpu_warp_params& p, float* out) {
  // One sample's worth of the colour in the output layout, copied into each slot.
  const int64_t per_sample = OutputElements(p, 1);
  const warp::OutputLayout layout = Layout(p);
  std::vector<float> sample(static_cast<size_t>(per_sample));
  for (int64_t y = 0; y < p.out_height; ++y) {
    for (int64_t x = 0; x < p.out_width; ++x) {
      for (int c = 0; c < 3; ++c) sample[warp::OutputIndex(layout, 0, y, x, c)] = p.oob[c];
    }
  }
  const size_t bytes = static_cast<size_t>(per_sample) * sizeof(float);
  for (int64_t k = 0; k < count; ++k) {
    const auto dst = reinterpret_cast<CUdeviceptr>(out + k * per_sample);
    // On the caller's stream: TF's streams are non-blocking, so they would not wait for a copy on the
    // legacy default stream (cuMemcpyHtoD from pageable memory may return before its DMA lands).
    BZNA_GPU_RETURN_IF_ERROR(
        stream != nullptr
            ? Check(*g.d, g.d->cu->cuMemcpyHtoDAsync(dst, sample.data(), bytes, stream),
                    "copying to the GPU (cuMemcpyHtoDAsync)")
            : Check(*g.d, g.d->cu->cuMemcpyHtoD(dst, sample.data(), bytes), "copying to the GPU (cuMemcpyHtoD)"));
  }
  // `sample` is pageable and local: the copies must have read it before it goes.
  if (stream != nullptr) {
    BZNA_GPU_RETURN_IF_ERROR(
        Check(*g.d, g.d->cu->cuStreamSynchronize(stream), "waiting for the stream (cuStreamSynchronize)"));
  }
  return Status();
}

namespace {

Status DecodeYuv(const Gpu& g, CUstream stream, const uint8_t* const* pictures, const uint64_t* sizes,
                 int64_t count, int32_t max_height, int32_t max_width, uint8_t* y, uint8_t* cb, uint8_t* cr,
                 int32_t* frame_sizes) {
  auto pool = NvdecPool::ForContext(*g.d, g.context);
  if (!pool.ok()) return pool.status();
  const int64_t chroma_height = (max_height + 1) / 2, chroma_width = (max_width + 1) / 2;
  const FrameSink sink = [&](int64_t n, const NvdecFrame& f, CUstream s) -> Status {
    if (f.height > max_height || f.width > max_width) {
      return InvalidArgument("the decoded frame is ", f.width, "x", f.height, "; it does not fit slots of ",
                             max_width, "x", max_height);
    }
    frame_sizes[2 * n] = f.height;
    frame_sizes[2 * n + 1] = f.width;
    Nv12Copy c;
    c.luma = reinterpret_cast<const uint8_t*>(f.luma);
    c.chroma = reinterpret_cast<const uint8_t*>(f.chroma);
    c.pitch = f.pitch;
    c.width = f.width;
    c.height = f.height;
    c.y = y + n * static_cast<int64_t>(max_height) * max_width;
    c.cb = cb + n * chroma_height * chroma_width;
    c.cr = cr + n * chroma_height * chroma_width;
    c.slot_width = max_width;
    c.slot_chroma_width = static_cast<int>(chroma_width);
    return LaunchNv12ToPlanes(*g.d, g.kernels, s, c);
  };
  return (*pool)->DecodeBatch(pictures, sizes, count, stream, sink);
}

Status WarpYuv(const Gpu& g, CUstream stream, const uint8_t* y, const uint8_t* cb, const uint8_t* cr,
               int64_t count, int32_t height, int32_t width, const float* matrices, int64_t matrix_count,
               const bzna_gpu_warp_params& p, float* out) {
  YuvLaunch q = BaseLaunch<YuvLaunch>(matrices, matrix_count, p, out);
  const int ch = (height + 1) / 2, cw = (width + 1) / 2;
  q.luma = {y, width, height, width, 1};
  q.cb = {cb, cw, ch, cw, 1};
  q.cr = {cr, cw, ch, cw, 1};
  q.luma_sample_stride = static_cast<int64_t>(height) * width;
  q.chroma_sample_stride = static_cast<int64_t>(ch) * cw;
  BZNA_GPU_RETURN_IF_ERROR(LaunchWarpYuv(*g.d, g.kernels, stream, q, count));
  return Wait(g, stream);
}

Status WarpRgb(const Gpu& g, CUstream stream, const void* images, int32_t dtype, int64_t count, int32_t height,
               int32_t width, const float* matrices, int64_t matrix_count, const bzna_gpu_warp_params& p,
               float* out) {
  RgbLaunch q = BaseLaunch<RgbLaunch>(matrices, matrix_count, p, out);
  q.images = images;
  q.width = width;
  q.height = height;
  BZNA_GPU_RETURN_IF_ERROR(LaunchWarpRgb(*g.d, g.kernels, stream, q, count, dtype == BZNA_GPU_FLOAT32));
  return Wait(g, stream);
}

Status CheckPlanes(int64_t count, int32_t height, int32_t width, const void* a, const void* b, const void* c) {
  BZNA_GPU_RETURN_IF_ERROR(CheckCount(count));
  BZNA_GPU_RETURN_IF_ERROR(CheckSide("a source height", height));
  BZNA_GPU_RETURN_IF_ERROR(CheckSide("a source width", width));
  BZNA_GPU_RETURN_IF_ERROR(CheckPointer(a, count, "the source"));
  BZNA_GPU_RETURN_IF_ERROR(CheckPointer(b, count, "the source"));
  return CheckPointer(c, count, "the source");
}

Status CheckDtype(int32_t dtype) {
  if (dtype != BZNA_GPU_UINT8 && dtype != BZNA_GPU_FLOAT32) {
    return InvalidArgument("expected dtype BZNA_GPU_UINT8 (0) or BZNA_GPU_FLOAT32 (1). Received ", dtype);
  }
  return Status();
}

Status CheckSlots(int32_t max_height, int32_t max_width, int64_t count, const void* y, const void* cb,
                  const void* cr, const void* frame_sizes) {
  BZNA_GPU_RETURN_IF_ERROR(CheckSide("max_height", max_height));
  BZNA_GPU_RETURN_IF_ERROR(CheckSide("max_width", max_width));
  BZNA_GPU_RETURN_IF_ERROR(CheckPlanes(count, max_height, max_width, y, cb, cr));
  return CheckPointer(frame_sizes, count, "frame_sizes");
}

// The checks of each call, shared by its device and host variants.
Status CheckDecodeWarp(const uint8_t* const* pictures, const uint64_t* sizes, int64_t count,
                       const float* matrices, int64_t matrix_count, const int32_t* picture_sizes,
                       const bzna_gpu_warp_params* params, const float* out) {
  BZNA_GPU_RETURN_IF_ERROR(CheckPictures(pictures, sizes, count));
  BZNA_GPU_RETURN_IF_ERROR(CheckPictureSizes(picture_sizes, count));
  BZNA_GPU_RETURN_IF_ERROR(CheckParams(params));
  BZNA_GPU_RETURN_IF_ERROR(CheckMatrices(matrices, matrix_count, count));
  return CheckPointer(out, count, "an output buffer");
}

Status CheckDecodeYuv(const uint8_t* const* pictures, const uint64_t* sizes, int64_t count, int32_t max_height,
                      int32_t max_width, const void* y, const void* cb, const void* cr, const void* frame_sizes) {
  BZNA_GPU_RETURN_IF_ERROR(CheckPictures(pictures, sizes, count));
  return CheckSlots(max_height, max_width, count, y, cb, cr, frame_sizes);
}

Status CheckWarp(int64_t count, int32_t height, int32_t width, const void* a, const void* b, const void* c,
                 const float* matrices, int64_t matrix_count, const bzna_gpu_warp_params* params,
                 const float* out) {
  BZNA_GPU_RETURN_IF_ERROR(CheckPlanes(count, height, width, a, b, c));
  BZNA_GPU_RETURN_IF_ERROR(CheckParams(params));
  BZNA_GPU_RETURN_IF_ERROR(CheckMatrices(matrices, matrix_count, count));
  return CheckPointer(out, count, "an output buffer");
}

// JSON string escaping for the few strings describe() writes.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

Status Describe(int device, std::string* json) {
  return WithGpu(device, nullptr, [&](const Gpu& g) -> Status {
    const Driver& d = *g.d;
    int major = 0, minor = 0;
    CUdevice dev;
    BZNA_GPU_RETURN_IF_ERROR(CurrentComputeCapability(d, &major, &minor, &dev));
    char name[256] = {0};
    d.cu->cuDeviceGetName(name, sizeof(name) - 1, dev);
    int version = 0;
    if (d.driver_get_version != nullptr) d.driver_get_version(&version);
    std::string nvdec;
    auto pool = NvdecPool::ForContext(d, g.context);
    if (pool.ok()) {
      const NvdecCaps& c = (*pool)->caps();
      nvdec = Cat("{\"available\": true, \"engines\": ", c.engines, ", \"sessions\": ", (*pool)->SessionsFor(1 << 20),
                  ", \"min_size\": [", c.min_width, ", ", c.min_height, "], \"max_size\": [", c.max_width, ", ",
                  c.max_height, "], \"max_mb_count\": ", c.max_mb_count, "}");
    } else {
      nvdec = Cat("{\"available\": false, \"reason\": ", Quote(pool.status().message()), "}");
    }
    *json = Cat("{\"abi_version\": ", BZNA_GPU_ABI_VERSION, ", \"device\": ", device, ", \"name\": ", Quote(name),
                ", \"compute_capability\": \"", major, ".", minor, "\", \"driver_version\": ", version,
                ", \"kernel_image\": ", Quote(g.kernels.image), ", \"nvdec\": ", nvdec, "}");
    return Status();
  });
}

}  // namespace
}  // namespace gpu
}  // namespace bzna_tf

using bzna_tf::gpu::Status;
namespace g = bzna_tf::gpu;

extern "C" {

int bzna_gpu_abi_version(void) { return BZNA_GPU_ABI_VERSION; }

const char* bzna_gpu_last_error(void) { return g::g_last_error.c_str(); }

int bzna_gpu_probe(void) {
  auto d = g::GetDriver();
  if (!d.ok()) {
    g::Finish(d.status());
    return 0;
  }
  if ((*d)->cuvid == nullptr) {
    g::g_last_error = (*d)->cuvid_error;
    return BZNA_GPU_HAS_CUDA;
  }
  g::g_last_error.clear();
  return BZNA_GPU_HAS_CUDA | BZNA_GPU_HAS_NVDEC;
}

int bzna_gpu_describe(int device, char* buf, uint64_t len) {
  if (buf == nullptr || len == 0) return g::Finish(g::InvalidArgument("expected a buffer. Received none"));
  std::string json;
  const Status s = g::Describe(device, &json);
  if (s.ok()) {
    const size_t n = std::min<size_t>(json.size(), len - 1);
    std::memcpy(buf, json.data(), n);
    buf[n] = '\0';
  }
  return g::Finish(s);
}

int bzna_gpu_set_nvdec_sessions(int sessions) {
  if (sessions < 0) return g::Finish(g::InvalidArgument("expected sessions >= 0. Received ", sessions));
  g::SetNvdecSessions(sessions);
  return g::Finish(Status());
}

int bzna_gpu_decode_warp(int device, void* stream, const uint8_t* const* pictures, const uint64_t* sizes,
                         int64_t count, const float* matrices, int64_t matrix_count, const int32_t* picture_sizes,
                         const bzna_gpu_warp_params* params, float* out) {
  Status s = g::CheckDecodeWarp(pictures, sizes, count, matrices, matrix_count, picture_sizes, params, out);
  if (s.ok() && count > 0) {
    auto cu_stream = static_cast<CUstream>(stream);
    s = g::WithGpu(device, cu_stream, [&](const g::Gpu& gpu) {
      return g::DecodeWarp(gpu, cu_stream, pictures, sizes, count, matrices, matrix_count, picture_sizes, *params,
                           out);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_decode_warp_host(int device, const uint8_t* const* pictures, const uint64_t* sizes, int64_t count,
                              const float* matrices, int64_t matrix_count, const int32_t* picture_sizes,
                              const bzna_gpu_warp_params* params, float* out) {
  Status s = g::CheckDecodeWarp(pictures, sizes, count, matrices, matrix_count, picture_sizes, params, out);
  if (s.ok() && count > 0) {
    s = g::WithGpu(device, nullptr, [&](const g::Gpu& gpu) -> Status {
      g::DeviceBuffer m(*gpu.d), o(*gpu.d);
      const uint64_t out_bytes = g::OutputElements(*params, count) * sizeof(float);
      BZNA_GPU_RETURN_IF_ERROR(m.Upload(matrices, matrix_count * 9 * sizeof(float)));
      BZNA_GPU_RETURN_IF_ERROR(o.Allocate(out_bytes));
      BZNA_GPU_RETURN_IF_ERROR(
          g::DecodeWarp(gpu, nullptr, pictures, sizes, count, m.get<float>(), matrix_count, picture_sizes, *params,
                        o.get<float>()));
      return o.Download(out, out_bytes);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_decode_yuv(int device, void* stream, const uint8_t* const* pictures, const uint64_t* sizes,
                        int64_t count, int32_t max_height, int32_t max_width, uint8_t* y, uint8_t* cb, uint8_t* cr,
                        int32_t* frame_sizes) {
  Status s = g::CheckDecodeYuv(pictures, sizes, count, max_height, max_width, y, cb, cr, frame_sizes);
  if (s.ok() && count > 0) {
    auto cu_stream = static_cast<CUstream>(stream);
    s = g::WithGpu(device, cu_stream, [&](const g::Gpu& gpu) {
      return g::DecodeYuv(gpu, cu_stream, pictures, sizes, count, max_height, max_width, y, cb, cr, frame_sizes);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_decode_yuv_host(int device, const uint8_t* const* pictures, const uint64_t* sizes, int64_t count,
                             int32_t max_height, int32_t max_width, uint8_t* y, uint8_t* cb, uint8_t* cr,
                             int32_t* frame_sizes) {
  Status s = g::CheckDecodeYuv(pictures, sizes, count, max_height, max_width, y, cb, cr, frame_sizes);
  if (s.ok() && count > 0) {
    s = g::WithGpu(device, nullptr, [&](const g::Gpu& gpu) -> Status {
      const uint64_t luma = static_cast<uint64_t>(count) * max_height * max_width;
      const uint64_t chroma = static_cast<uint64_t>(count) * ((max_height + 1) / 2) * ((max_width + 1) / 2);
      // The slots' untouched parts keep the caller's bytes.
      g::DeviceBuffer dy(*gpu.d), dcb(*gpu.d), dcr(*gpu.d);
      BZNA_GPU_RETURN_IF_ERROR(dy.Upload(y, luma));
      BZNA_GPU_RETURN_IF_ERROR(dcb.Upload(cb, chroma));
      BZNA_GPU_RETURN_IF_ERROR(dcr.Upload(cr, chroma));
      BZNA_GPU_RETURN_IF_ERROR(g::DecodeYuv(gpu, nullptr, pictures, sizes, count, max_height, max_width,
                                            dy.get<uint8_t>(), dcb.get<uint8_t>(), dcr.get<uint8_t>(),
                                            frame_sizes));
      BZNA_GPU_RETURN_IF_ERROR(dy.Download(y, luma));
      BZNA_GPU_RETURN_IF_ERROR(dcb.Download(cb, chroma));
      return dcr.Download(cr, chroma);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_warp_yuv420(int device, void* stream, const uint8_t* y, const uint8_t* cb, const uint8_t* cr,
                         int64_t count, int32_t height, int32_t width, const float* matrices, int64_t matrix_count,
                         const bzna_gpu_warp_params* params, float* out) {
  Status s = g::CheckWarp(count, height, width, y, cb, cr, matrices, matrix_count, params, out);
  if (s.ok() && count > 0) {
    auto cu_stream = static_cast<CUstream>(stream);
    s = g::WithGpu(device, cu_stream, [&](const g::Gpu& gpu) {
      return g::WarpYuv(gpu, cu_stream, y, cb, cr, count, height, width, matrices, matrix_count, *params, out);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_warp_yuv420_host(int device, const uint8_t* y, const uint8_t* cb, const uint8_t* cr, int64_t count,
                              int32_t height, int32_t width, const float* matrices, int64_t matrix_count,
                              const bzna_gpu_warp_params* params, float* out) {
  Status s = g::CheckWarp(count, height, width, y, cb, cr, matrices, matrix_count, params, out);
  if (s.ok() && count > 0) {
    s = g::WithGpu(device, nullptr, [&](const g::Gpu& gpu) -> Status {
      const uint64_t luma = static_cast<uint64_t>(count) * height * width;
      const uint64_t chroma = static_cast<uint64_t>(count) * ((height + 1) / 2) * ((width + 1) / 2);
      const uint64_t out_bytes = g::OutputElements(*params, count) * sizeof(float);
      g::DeviceBuffer dy(*gpu.d), dcb(*gpu.d), dcr(*gpu.d), m(*gpu.d), o(*gpu.d);
      BZNA_GPU_RETURN_IF_ERROR(dy.Upload(y, luma));
      BZNA_GPU_RETURN_IF_ERROR(dcb.Upload(cb, chroma));
      BZNA_GPU_RETURN_IF_ERROR(dcr.Upload(cr, chroma));
      BZNA_GPU_RETURN_IF_ERROR(m.Upload(matrices, matrix_count * 9 * sizeof(float)));
      BZNA_GPU_RETURN_IF_ERROR(o.Allocate(out_bytes));
      BZNA_GPU_RETURN_IF_ERROR(g::WarpYuv(gpu, nullptr, dy.get<uint8_t>(), dcb.get<uint8_t>(), dcr.get<uint8_t>(),
                                         count, height, width, m.get<float>(), matrix_count, *params,
                                         o.get<float>()));
      return o.Download(out, out_bytes);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_warp_rgb(int device, void* stream, const void* images, int32_t dtype, int64_t count, int32_t height,
                      int32_t width, const float* matrices, int64_t matrix_count, const bzna_gpu_warp_params* params,
                      float* out) {
  Status s = g::CheckDtype(dtype);
  if (s.ok()) s = g::CheckWarp(count, height, width, images, images, images, matrices, matrix_count, params, out);
  if (s.ok() && count > 0) {
    auto cu_stream = static_cast<CUstream>(stream);
    s = g::WithGpu(device, cu_stream, [&](const g::Gpu& gpu) {
      return g::WarpRgb(gpu, cu_stream, images, dtype, count, height, width, matrices, matrix_count, *params, out);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_warp_rgb_host(int device, const void* images, int32_t dtype, int64_t count, int32_t height,
                           int32_t width, const float* matrices, int64_t matrix_count,
                           const bzna_gpu_warp_params* params, float* out) {
  Status s = g::CheckDtype(dtype);
  if (s.ok()) s = g::CheckWarp(count, height, width, images, images, images, matrices, matrix_count, params, out);
  if (s.ok() && count > 0) {
    s = g::WithGpu(device, nullptr, [&](const g::Gpu& gpu) -> Status {
      const uint64_t bytes = static_cast<uint64_t>(count) * height * width * 3 * (dtype == BZNA_GPU_FLOAT32 ? 4 : 1);
      const uint64_t out_bytes = g::OutputElements(*params, count) * sizeof(float);
      g::DeviceBuffer im(*gpu.d), m(*gpu.d), o(*gpu.d);
      BZNA_GPU_RETURN_IF_ERROR(im.Upload(images, bytes));
      BZNA_GPU_RETURN_IF_ERROR(m.Upload(matrices, matrix_count * 9 * sizeof(float)));
      BZNA_GPU_RETURN_IF_ERROR(o.Allocate(out_bytes));
      BZNA_GPU_RETURN_IF_ERROR(g::WarpRgb(gpu, nullptr, im.get<void>(), dtype, count, height, width, m.get<float>(),
                                          matrix_count, *params, o.get<float>()));
      return o.Download(out, out_bytes);
    });
  }
  return g::Finish(s);
}

int bzna_gpu_alloc(int device, uint64_t bytes, void** ptr) {
  if (ptr == nullptr) return g::Finish(g::InvalidArgument("expected a place for the pointer. Received null"));
  *ptr = nullptr;
  return g::Finish(g::WithGpu(device, nullptr, [&](const g::Gpu& gpu) -> Status {
    CUdeviceptr p = 0;
    BZNA_GPU_RETURN_IF_ERROR(g::Check(*gpu.d, gpu.d->cu->cuMemAlloc(&p, bytes), "cuMemAlloc"));
    *ptr = reinterpret_cast<void*>(p);
    return Status();
  }));
}

int bzna_gpu_free(int device, void* ptr) {
  if (ptr == nullptr) return g::Finish(Status());
  return g::Finish(g::WithGpu(device, nullptr, [&](const g::Gpu& gpu) {
    return g::Check(*gpu.d, gpu.d->cu->cuMemFree(reinterpret_cast<CUdeviceptr>(ptr)), "cuMemFree");
  }));
}

int bzna_gpu_fill_oob(int device, void* stream, int64_t count, const bzna_gpu_warp_params* params, float* out) {
  Status s = g::CheckParams(params);
  if (s.ok() && count < 0) s = g::InvalidArgument("expected a count of at least 0. Received ", count);
  if (s.ok()) s = g::CheckPointer(out, count, "an output buffer");
  if (s.ok() && count > 0) {
    auto cu_stream = static_cast<CUstream>(stream);
    s = g::WithGpu(device, cu_stream,
                   [&](const g::Gpu& gpu) { return g::FillOob(gpu, cu_stream, count, *params, out); });
  }
  return g::Finish(s);
}

int bzna_gpu_copy(int device, void* dst, const void* src, uint64_t bytes) {
  if (bytes > 0 && (dst == nullptr || src == nullptr)) {
    return g::Finish(g::InvalidArgument("expected a source and a destination. Received a null pointer"));
  }
  if (bytes == 0) return g::Finish(Status());
  return g::Finish(g::WithGpu(device, nullptr, [&](const g::Gpu& gpu) {
    return g::Check(*gpu.d,
                    gpu.d->cu->cuMemcpy(reinterpret_cast<CUdeviceptr>(dst), reinterpret_cast<CUdeviceptr>(src), bytes),
                    "cuMemcpy");
  }));
}

}  // extern "C"
