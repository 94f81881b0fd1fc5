#include "lib/hevc_decoder.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace bzna_tf {
namespace {

// The head of FFmpeg's AVFrame, unchanged from FFmpeg 4.4 (libavcodec 58) to 9
// (libavcodec 63), and checked on the FFmpeg loaded (CheckFrameHead): only these
// fields are read; the frame is allocated by FFmpeg.
struct AVFrameHead {
  uint8_t* data[8];
  int linesize[8];
  uint8_t** extended_data;
  int width;
  int height;
  int nb_samples;
  int format;
};

constexpr int kMinAvcodecMajor = 58;
constexpr int kYuv420p = 0;  // AV_PIX_FMT_YUV420P, the first of FFmpeg's pixel formats
// AV_INPUT_BUFFER_PADDING_SIZE since FFmpeg 4: zeroed bytes after a packet.
constexpr size_t kPacketPadding = 64;
// AVERROR_EOF = -MKTAG('E','O','F',' ').
constexpr int kAverrorEof = -static_cast<int>('E' | ('O' << 8) | ('F' << 16) | (' ' << 24));

struct Ffmpeg {
  // libavutil
  unsigned (*avutil_version)();
  void* (*av_frame_alloc)();
  void (*av_frame_free)(void** frame);
  int (*av_frame_get_buffer)(void* frame, int align);
  void* (*av_malloc)(size_t size);
  void (*av_free)(void* ptr);
  const char* (*av_get_pix_fmt_name)(int pix_fmt);
  int (*av_strerror)(int errnum, char* buf, size_t size);
  int (*av_dict_set)(void** dict, const char* key, const char* value, int flags);
  void (*av_dict_free)(void** dict);
  // libavcodec
  unsigned (*avcodec_version)();
  const void* (*avcodec_find_decoder_by_name)(const char* name);
  void* (*avcodec_alloc_context3)(const void* codec);
  int (*avcodec_open2)(void* ctx, const void* codec, void** options);
  void (*avcodec_free_context)(void** ctx);
  int (*avcodec_send_packet)(void* ctx, const void* packet);
  int (*avcodec_receive_frame)(void* ctx, void* frame);
  void (*avcodec_flush_buffers)(void* ctx);
  void* (*av_packet_alloc)();
  void (*av_packet_free)(void** packet);
  int (*av_packet_from_data)(void* packet, uint8_t* data, int size);
  void (*av_packet_unref)(void* packet);

  const void* hevc = nullptr;
  std::string version;
};

Ffmpeg* g_ffmpeg = nullptr;                   // set once by LoadFfmpeg, never freed
absl::Status* g_load_status = new absl::Status(absl::FailedPreconditionError("LoadFfmpeg was never called"));

template <typename F>
bool Resolve(void* lib, const char* name, F* fn, std::string* missing) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
  if (!*fn) absl::StrAppend(missing, missing->empty() ? "" : ", ", name);
  return *fn != nullptr;
}

// Whether the FFmpeg loaded lays out the head of its frames as AVFrameHead: a
// frame whose size and format are written through AVFrameHead gets its planes
// from FFmpeg (av_frame_get_buffer reads those fields and fills data, linesize
// and extended_data). A newer FFmpeg that moved them is refused here, before
// any picture is read through the wrong offsets.
absl::Status CheckFrameHead(const Ffmpeg& f, const std::string& avcodec_path) {
  const char* yuv420p = f.av_get_pix_fmt_name(kYuv420p);
  void* frame = f.av_frame_alloc();
  if (!frame) return absl::ResourceExhaustedError("FFmpeg could not allocate a frame");
  auto* head = static_cast<AVFrameHead*>(frame);
  head->width = 66;
  head->height = 34;
  head->format = kYuv420p;
  const int err = f.av_frame_get_buffer(frame, 32);
  const bool same = err >= 0 && yuv420p && std::strcmp(yuv420p, "yuv420p") == 0 && head->width == 66 &&
                    head->height == 34 && head->extended_data == head->data && head->data[0] && head->data[1] &&
                    head->data[2] && !head->data[3] && head->linesize[0] >= 66 && head->linesize[1] >= 33 &&
                    head->linesize[2] >= 33 && head->linesize[3] == 0;
  f.av_frame_free(&frame);
  if (same) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      avcodec_path, " is ", f.version, ", whose frames do not begin as bzna_tf reads them (data, linesize, ",
      "extended_data, width, height, nb_samples, format, as in FFmpeg 4.4 to 9): install a PyAV whose FFmpeg ",
      "does (PyAV 19 has FFmpeg 9: pip install 'av<20')"));
}

absl::Status DoLoad(const std::string& avutil_path, const std::string& avcodec_path, Ffmpeg* f) {
  // avutil first: avcodec depends on it and finds it by its soname.
  void* util = dlopen(avutil_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!util) return absl::FailedPreconditionError(absl::StrCat("cannot open libavutil: ", dlerror()));
  void* codec = dlopen(avcodec_path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!codec) return absl::FailedPreconditionError(absl::StrCat("cannot open libavcodec: ", dlerror()));
  std::string missing;
  Resolve(util, "avutil_version", &f->avutil_version, &missing);
  Resolve(util, "av_frame_alloc", &f->av_frame_alloc, &missing);
  Resolve(util, "av_frame_free", &f->av_frame_free, &missing);
  Resolve(util, "av_frame_get_buffer", &f->av_frame_get_buffer, &missing);
  Resolve(util, "av_malloc", &f->av_malloc, &missing);
  Resolve(util, "av_free", &f->av_free, &missing);
  Resolve(util, "av_get_pix_fmt_name", &f->av_get_pix_fmt_name, &missing);
  Resolve(util, "av_strerror", &f->av_strerror, &missing);
  Resolve(util, "av_dict_set", &f->av_dict_set, &missing);
  Resolve(util, "av_dict_free", &f->av_dict_free, &missing);
  Resolve(codec, "avcodec_version", &f->avcodec_version, &missing);
  Resolve(codec, "avcodec_find_decoder_by_name", &f->avcodec_find_decoder_by_name, &missing);
  Resolve(codec, "avcodec_alloc_context3", &f->avcodec_alloc_context3, &missing);
  Resolve(codec, "avcodec_open2", &f->avcodec_open2, &missing);
  Resolve(codec, "avcodec_free_context", &f->avcodec_free_context, &missing);
  Resolve(codec, "avcodec_send_packet", &f->avcodec_send_packet, &missing);
  Resolve(codec, "avcodec_receive_frame", &f->avcodec_receive_frame, &missing);
  Resolve(codec, "avcodec_flush_buffers", &f->avcodec_flush_buffers, &missing);
  Resolve(codec, "av_packet_alloc", &f->av_packet_alloc, &missing);
  Resolve(codec, "av_packet_free", &f->av_packet_free, &missing);
  Resolve(codec, "av_packet_from_data", &f->av_packet_from_data, &missing);
  Resolve(codec, "av_packet_unref", &f->av_packet_unref, &missing);
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("FFmpeg lacks ", missing, " (", avcodec_path, ")"));
  }
  const unsigned v = f->avcodec_version();
  const int major = static_cast<int>(v >> 16);
  f->version = absl::StrCat("libavcodec ", major, ".", (v >> 8) & 0xff, ".", v & 0xff);
  if (major < kMinAvcodecMajor) {
    return absl::FailedPreconditionError(absl::StrCat(avcodec_path, " is ", f->version, "; bzna_tf needs libavcodec ",
                                                      kMinAvcodecMajor, " (FFmpeg 4.4) or newer"));
  }
  if (absl::Status s = CheckFrameHead(*f, avcodec_path); !s.ok()) return s;
  f->hevc = f->avcodec_find_decoder_by_name("hevc");
  if (!f->hevc) return absl::FailedPreconditionError(absl::StrCat(f->version, " has no HEVC decoder"));
  return absl::OkStatus();
}

std::string AvError(int code) {
  char buf[128] = {0};
  if (g_ffmpeg->av_strerror(code, buf, sizeof(buf)) < 0) return absl::StrCat("error ", code);
  return buf;
}

// Decoder contexts waiting for reuse.
class Pool {
 public:
  void* Acquire(absl::Status* status) {
    {
      absl::MutexLock lock(&mu_);
      if (!free_.empty()) {
        void* ctx = free_.back();
        free_.pop_back();
        return ctx;
      }
    }
    const Ffmpeg& f = *g_ffmpeg;
    void* ctx = f.avcodec_alloc_context3(f.hevc);
    if (!ctx) {
      *status = absl::ResourceExhaustedError("FFmpeg could not allocate an HEVC decoder");
      return nullptr;
    }
    void* options = nullptr;
    // One thread per decoder: parallelism comes from decoding many pictures.
    f.av_dict_set(&options, "threads", "1", 0);
    const int err = f.avcodec_open2(ctx, f.hevc, &options);
    f.av_dict_free(&options);
    if (err < 0) {
      f.avcodec_free_context(&ctx);
      *status = absl::InternalError(absl::StrCat("FFmpeg could not open the HEVC decoder: ", AvError(err)));
      return nullptr;
    }
    return ctx;
  }
  void Release(void* ctx) {
    absl::MutexLock lock(&mu_);
    free_.push_back(ctx);
  }

 private:
  absl::Mutex mu_;
  std::vector<void*> free_ ABSL_GUARDED_BY(mu_);
};

Pool* g_pool = new Pool();

}  // namespace

absl::Status LoadFfmpeg(const std::string& avutil_path, const std::string& avcodec_path) {
  static std::once_flag once;
  std::call_once(once, [&] {
    auto* f = new Ffmpeg();
    *g_load_status = DoLoad(avutil_path, avcodec_path, f);
    if (g_load_status->ok()) g_ffmpeg = f;
  });
  return *g_load_status;
}

bool FfmpegLoaded() { return g_ffmpeg != nullptr; }

std::string FfmpegVersion() { return g_ffmpeg ? g_ffmpeg->version : "FFmpeg not loaded"; }

DecodedPicture::~DecodedPicture() {
  if (frame_) g_ffmpeg->av_frame_free(&frame_);
}

absl::Status DecodeHevc(absl::string_view annexb, DecodedPicture* out) {
  if (!g_ffmpeg) {
    return absl::FailedPreconditionError(absl::StrCat(
        "bzna_tf's HEVC decoder needs FFmpeg's libavcodec (bzna_tf.ops.load_library() loads PyAV's): ",
        g_load_status->message()));
  }
  const Ffmpeg& f = *g_ffmpeg;
  if (annexb.empty() || annexb.size() > (1u << 30)) {
    return absl::InvalidArgumentError(absl::StrCat("expected an H.265 picture. Received ", annexb.size(), " bytes"));
  }
  absl::Status status;
  void* ctx = g_pool->Acquire(&status);
  if (!ctx) return status;

  void* packet = f.av_packet_alloc();
  void* frame = f.av_frame_alloc();
  auto* data = static_cast<uint8_t*>(f.av_malloc(annexb.size() + kPacketPadding));
  int err = (!packet || !frame || !data) ? -ENOMEM : 0;
  if (err == 0) {
    std::memcpy(data, annexb.data(), annexb.size());
    std::memset(data + annexb.size(), 0, kPacketPadding);
    err = f.av_packet_from_data(packet, data, static_cast<int>(annexb.size()));  // takes `data`
    if (err < 0) f.av_free(data);
  } else if (data) {
    f.av_free(data);
  }
  if (err >= 0) err = f.avcodec_send_packet(ctx, packet);
  if (err >= 0) {
    err = f.avcodec_receive_frame(ctx, frame);
    if (err == -EAGAIN) {  // the decoder holds the picture back until the stream ends
      err = f.avcodec_send_packet(ctx, nullptr);
      if (err >= 0) err = f.avcodec_receive_frame(ctx, frame);
    }
  }
  if (packet) f.av_packet_free(&packet);
  f.avcodec_flush_buffers(ctx);  // ready for the next, independent picture
  if (err < 0) {
    f.avcodec_free_context(&ctx);  // a decoder that failed is not trusted again
    if (frame) f.av_frame_free(&frame);
    const std::string why = err == kAverrorEof ? "no picture came out" : AvError(err);
    return absl::InvalidArgumentError(
        absl::StrCat("could not decode the ", annexb.size(), "-byte H.265 picture (", FfmpegVersion(), ": ", why, ")"));
  }
  g_pool->Release(ctx);

  const auto* head = static_cast<const AVFrameHead*>(frame);
  const char* fmt = f.av_get_pix_fmt_name(head->format);
  const std::string format = fmt ? fmt : "unknown";
  if (format != "yuv420p" && format != "yuvj420p") {
    f.av_frame_free(&frame);
    return absl::InvalidArgumentError(absl::StrCat("expected an 8-bit 4:2:0 picture, decoded ", format));
  }
  if (out->frame_) f.av_frame_free(&out->frame_);
  out->frame_ = frame;
  out->width_ = head->width;
  out->height_ = head->height;
  for (int i = 0; i < 3; ++i) {
    out->planes_[i] = head->data[i];
    out->strides_[i] = head->linesize[i];
  }
  return absl::OkStatus();
}

}  // namespace bzna_tf

// For Python (ctypes): loads FFmpeg; returns null, or why it failed.
extern "C" __attribute__((visibility("default"))) const char* bzna_tf_load_ffmpeg(const char* avutil_path,
                                                                                 const char* avcodec_path) {
  static std::string* error = new std::string();
  const absl::Status s = bzna_tf::LoadFfmpeg(avutil_path, avcodec_path);
  if (s.ok()) return nullptr;
  *error = std::string(s.message());
  return error->c_str();
}
