#include "gpu/core/nvdec.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <thread>

namespace bzna_tf {
namespace gpu {

namespace {

// Pictures the parser holds back before displaying one: the pipelining depth
// of a session (NVIDIA recommends 2 to 4 for decode/display overlap).
constexpr unsigned kDisplayDelay = 4;
// Output surfaces mapped at once per session; a surface is unmapped when the
// sink's work on it is done.
constexpr unsigned kOutputSurfaces = 8;
// Decode surfaces the parser cycles through. A surface is busy from its
// decode until its output is unmapped: up to kDisplayDelay waiting for
// display, kOutputSurfaces mapped, one being decoded, one spare.
constexpr unsigned kDecodeSurfaces = kDisplayDelay + kOutputSurfaces + 4;
// NVDEC's own ceiling on decode surfaces.
constexpr unsigned kMaxDecodeSurfaces = 32;
// Decoders (coded sizes) a session keeps between batches, most recently used
// first: always kMinDecodersKept; then, up to kMaxDecodersKept, as long as the
// kept decoders' coded area stays within kDecoderAreaBudget (8 frames of
// 512 x 512, about 75 MB of surfaces). Files of the benzina layout need one or
// two sizes (512 x 512 thumbnails); the compact layout's frames are rounded to
// 64 (at least 144), so thumbnails come in up to 49 sizes, a handful of them
// common in ImageNet-like files, and creating a decoder costs far more than
// decoding a picture (tens of ms).
constexpr size_t kMinDecodersKept = 4;
constexpr size_t kMaxDecodersKept = 16;
constexpr uint64_t kDecoderAreaBudget = uint64_t{8} * 512 * 512;
constexpr int kMaxSessions = 16;

std::atomic<int> g_sessions{0};

template <typename Rect>
void SetRect(Rect* r, int left, int top, int width, int height) {
  r->left = static_cast<short>(left);
  r->top = static_cast<short>(top);
  r->right = static_cast<short>(left + width);
  r->bottom = static_cast<short>(top + height);
}

int DefaultSessions(int engines) {
  if (const char* env = std::getenv("BZNA_GPU_NVDEC_SESSIONS")) {
    const int n = std::atoi(env);
    if (n > 0) return std::min(n, kMaxSessions);
  }
  return std::clamp(engines > 0 ? engines : 2, 1, kMaxSessions);
}

}  // namespace

void SetNvdecSessions(int sessions) { g_sessions = std::clamp(sessions, 0, kMaxSessions); }

// One decoder session: a parser, its decoders and a stream, used by one thread
// at a time (see nvdec.h).
class NvdecSession {
 public:
  NvdecSession(const Driver& d, const NvdecCaps& caps) : d_(d), v_(*d.cuvid), caps_(caps) {}

  Status Init(CUcontext context) {
    BZNA_GPU_RETURN_IF_ERROR(Check(d_, v_.cuvidCtxLockCreate(&lock_, context), "cuvidCtxLockCreate"));
    return Check(d_, d_.cu->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  }

  // Decodes the samples handed out by `next` until none is left or `stop` is
  // set; sets error()/error_sample() on failure. The context is current.
  void Run(const uint8_t* const* pictures, const uint64_t* sizes, int64_t count, std::atomic<int64_t>* next,
           std::atomic<bool>* stop, Event* start, const FrameSink* sink) {
    error_ = Status();
    error_sample_ = -1;
    feeding_ = -1;
    late_ = -1;
    sink_ = sink;
    fed_ = output_ = 0;
    Status s = start->MakeWait(stream_);
    if (s.ok()) s = CreateParser();
    if (!s.ok()) {
      Fail(-1, s);
    } else {
      for (int64_t n; !stop->load() && (n = next->fetch_add(1)) < count;) {
        if (!Feed(n, pictures[n], sizes[n])) break;
      }
      if (error_.ok()) Flush();
    }
    if (!error_.ok()) stop->store(true);
    const Status released = ReleaseAll();
    if (error_.ok() && !released.ok()) Fail(-1, released);
    if (error_.ok() && output_ != fed_) {
      for (const Surface& f : surfaces_) {
        if (f.busy) {
          Fail(f.sample, Internal("NVDEC decoded the picture but its parser never output it"));
          break;
        }
      }
      if (error_.ok()) Fail(-1, Internal("NVDEC output ", output_, " of ", fed_, " pictures"));
    }
    Finish();
  }

  const Status& error() const { return error_; }
  int64_t error_sample() const { return error_sample_; }
  // A failure before Run (the thread could not make the context current).
  void SetFailed(const Status& s) {
    error_ = s;
    error_sample_ = -1;
  }

 private:
  struct Decoder {
    CUvideodecoder handle = nullptr;
    unsigned coded_width = 0, coded_height = 0;
    unsigned surfaces = 0;  // decode surfaces it was created with (the parser must use as many)
    uint64_t last_used = 0;
    bool broken = false;
  };
  struct Surface {
    bool busy = false;
    int64_t sample = -1;
    Decoder* decoder = nullptr;
    int left = 0, top = 0, width = 0, height = 0;
  };
  struct Mapped {
    int surface;
    CUdeviceptr ptr;
    std::unique_ptr<Event> done;
  };

  // Records the first error of the batch; sample -1 = the sample being fed.
  void Fail(int64_t sample, const Status& s) {
    if (!error_.ok()) return;
    error_ = s;
    error_sample_ = sample >= 0 ? sample : feeding_;
  }

  Status CreateParser() {
    CUVIDPARSERPARAMS params;
    std::memset(&params, 0, sizeof(params));
    params.CodecType = cudaVideoCodec_HEVC;
    params.ulMaxNumDecodeSurfaces = kDecodeSurfaces;
    params.ulMaxDisplayDelay = kDisplayDelay;
    params.pUserData = this;
    params.pfnSequenceCallback = SequenceCallback;
    params.pfnDecodePicture = DecodeCallback;
    params.pfnDisplayPicture = DisplayCallback;
    current_ = nullptr;
    return Check(d_, v_.cuvidCreateVideoParser(&parser_, &params), "cuvidCreateVideoParser");
  }

  // Parses one picture. With CUVID_PKT_ENDOFPICTURE the parser knows the
  // picture is complete and decodes it inside this call (NVIDIA's low-latency
  // mode); display callbacks of earlier pictures run here too. Pictures are
  // matched to samples in order (awaiting_), so a picture decoded one call
  // late is still right. A sample left without a picture at the flush is an
  // error, named after the first call that decoded nothing although this
  // session's parser decodes in-call (late_). False on error.
  bool Feed(int64_t n, const uint8_t* data, uint64_t size) {
    feeding_ = n;
    ++fed_;
    awaiting_.push_back(n);
    CUVIDSOURCEDATAPACKET packet;
    std::memset(&packet, 0, sizeof(packet));
    packet.payload = data;
    packet.payload_size = static_cast<unsigned long>(size);
    packet.flags = CUVID_PKT_ENDOFPICTURE;
    const CUresult parsed = v_.cuvidParseVideoData(parser_, &packet);
    if (!error_.ok()) return false;
    const Status s = CheckPicture(d_, parsed, "NVDEC's parser (cuvidParseVideoData)");
    if (!s.ok()) {
      Fail(n, s);
    } else if (immediate_ && late_ < 0 && !awaiting_.empty() && awaiting_.back() == n) {
      late_ = n;  // no picture yet: an error at the flush if it never comes
    }
    return error_.ok();
  }

  // size 0: not known here.
  static Status NoPicture(uint64_t size) {
    return InvalidArgument("NVDEC found no picture in the ", size > 0 ? Cat(size, " bytes of ") : "",
                           "data (not an H.265 Annex-B picture, or a corrupt one)");
  }

  // End of stream: the parser displays what it still holds.
  void Flush() {
    feeding_ = -1;
    CUVIDSOURCEDATAPACKET packet;
    std::memset(&packet, 0, sizeof(packet));
    packet.flags = CUVID_PKT_ENDOFSTREAM;
    const CUresult parsed = v_.cuvidParseVideoData(parser_, &packet);
    if (error_.ok()) {
      const Status s = Check(d_, parsed, "flushing NVDEC's parser (cuvidParseVideoData)");
      if (!s.ok()) Fail(-1, s);
    }
    if (error_.ok() && !awaiting_.empty()) Fail(late_ >= 0 ? late_ : awaiting_.front(), NoPicture(0));
  }

  // After a batch: no parser kept (the next batch is a new stream), broken
  // decoders and the least recently used beyond the limits above destroyed.
  void Finish() {
    if (parser_ != nullptr) {
      v_.cuvidDestroyVideoParser(parser_);
      parser_ = nullptr;
    }
    current_ = nullptr;
    for (Surface& f : surfaces_) f = Surface();
    awaiting_.clear();
    std::sort(decoders_.begin(), decoders_.end(),
              [](const std::unique_ptr<Decoder>& a, const std::unique_ptr<Decoder>& b) {
                return a->last_used > b->last_used;
              });
    size_t kept = 0;
    uint64_t kept_area = 0;
    for (size_t i = 0; i < decoders_.size();) {
      const Decoder& dec = *decoders_[i];
      const uint64_t area = uint64_t{dec.coded_width} * dec.coded_height;
      const bool keep = !dec.broken && (kept < kMinDecodersKept ||
                                        (kept < kMaxDecodersKept && kept_area + area <= kDecoderAreaBudget));
      if (keep) {
        ++kept;
        kept_area += area;
        ++i;
      } else {
        v_.cuvidDestroyDecoder(decoders_[i]->handle);
        decoders_.erase(decoders_.begin() + static_cast<long>(i));
      }
    }
  }

  static int CUDAAPI SequenceCallback(void* self, CUVIDEOFORMAT* format) {
    auto* me = static_cast<NvdecSession*>(self);
    const StatusOr<int> surfaces = me->OnSequence(*format);
    if (!surfaces.ok()) {
      me->Fail(-1, surfaces.status());
      return 0;
    }
    return *surfaces;
  }

  StatusOr<int> OnSequence(const CUVIDEOFORMAT& f) {
    if (!error_.ok()) return error_;
    if (f.codec != cudaVideoCodec_HEVC || f.chroma_format != cudaVideoChromaFormat_420 ||
        f.bit_depth_luma_minus8 != 0 || f.bit_depth_chroma_minus8 != 0) {
      return InvalidArgument("expected an 8-bit 4:2:0 H.265 picture. Received codec ", static_cast<int>(f.codec),
                             ", chroma format ", static_cast<int>(f.chroma_format), ", bit depth ",
                             8 + f.bit_depth_luma_minus8);
    }
    const unsigned w = f.coded_width, h = f.coded_height;
    if (w < caps_.min_width || h < caps_.min_height || w > caps_.max_width || h > caps_.max_height ||
        static_cast<uint64_t>(w) * h / 256 > caps_.max_mb_count) {
      return InvalidArgument("NVDEC on this GPU decodes H.265 pictures of ", caps_.min_width, "x", caps_.min_height,
                             " to ", caps_.max_width, "x", caps_.max_height, " coded pixels (at most ",
                             caps_.max_mb_count, " macroblocks). Received a ", w, "x", h, " picture");
    }
    const int left = f.display_area.left, top = f.display_area.top;
    const int width = f.display_area.right - left, height = f.display_area.bottom - top;
    if (width <= 0 || height <= 0 || left < 0 || top < 0 || left + width > static_cast<int>(w) ||
        top + height > static_cast<int>(h)) {
      return InvalidArgument("the picture's conformance window (", left, ", ", top, ", ", width, "x", height,
                             ") does not fit its ", w, "x", h, " coded frame");
    }
    const unsigned surfaces = std::max<unsigned>(kDecodeSurfaces, f.min_num_decode_surfaces);
    if (surfaces > kMaxDecodeSurfaces) {
      return InvalidArgument("the stream needs ", surfaces, " decode surfaces; NVDEC has at most ",
                             kMaxDecodeSurfaces);
    }
    Decoder* decoder = nullptr;
    for (const auto& dec : decoders_) {
      if (!dec->broken && dec->coded_width == w && dec->coded_height == h && dec->surfaces >= surfaces) {
        decoder = dec.get();
      }
    }
    if (decoder == nullptr) {
      // Committed to the cache only once it exists: a failure leaves the
      // session as it was.
      auto created = std::make_unique<Decoder>();
      CUVIDDECODECREATEINFO c;
      std::memset(&c, 0, sizeof(c));
      c.ulWidth = w;
      c.ulHeight = h;
      c.ulNumDecodeSurfaces = surfaces;
      c.CodecType = cudaVideoCodec_HEVC;
      c.ChromaFormat = cudaVideoChromaFormat_420;
      c.ulCreationFlags = cudaVideoCreate_PreferCUVID;
      c.bitDepthMinus8 = 0;
      c.ulIntraDecodeOnly = 1;  // .bzna pictures are intra pictures
      c.ulMaxWidth = w;
      c.ulMaxHeight = h;
      // The whole coded frame; the conformance window is cropped by pointer
      // arithmetic, so one decoder serves every picture of this coded size.
      SetRect(&c.display_area, 0, 0, static_cast<int>(w), static_cast<int>(h));
      c.OutputFormat = cudaVideoSurfaceFormat_NV12;
      c.DeinterlaceMode = cudaVideoDeinterlaceMode_Weave;
      c.ulTargetWidth = w;
      c.ulTargetHeight = h;
      c.ulNumOutputSurfaces = kOutputSurfaces;
      c.vidLock = lock_;
      const Status s = Check(d_, v_.cuvidCreateDecoder(&created->handle, &c), "cuvidCreateDecoder");
      if (!s.ok()) return s.Prefixed(Cat("creating a decoder for a ", w, "x", h, " H.265 picture: "));
      created->coded_width = w;
      created->coded_height = h;
      created->surfaces = surfaces;
      decoder = created.get();
      decoders_.push_back(std::move(created));
    }
    decoder->last_used = ++tick_;
    current_ = decoder;
    left_ = left;
    top_ = top;
    width_ = width;
    height_ = height;
    return static_cast<int>(decoder->surfaces);
  }

  static int CUDAAPI DecodeCallback(void* self, CUVIDPICPARAMS* picture) {
    auto* me = static_cast<NvdecSession*>(self);
    if (!me->error_.ok()) return 0;  // e.g. the sequence callback refused the stream
    if (me->awaiting_.empty()) {
      me->Fail(-1, InvalidArgument("the data holds more than one picture; expected one"));
      return 0;
    }
    const int64_t sample = me->awaiting_.front();
    me->awaiting_.pop_front();
    if (sample == me->feeding_) me->immediate_ = true;
    const Status s = me->OnDecode(picture, sample);
    if (!s.ok()) {
      me->Fail(sample, s);
      return 0;
    }
    return 1;
  }

  Status OnDecode(CUVIDPICPARAMS* picture, int64_t sample) {
    if (current_ == nullptr) return InvalidArgument("a picture came before its sequence parameters");
    const int i = picture->CurrPicIdx;
    if (i < 0 || i >= static_cast<int>(kMaxDecodeSurfaces)) {
      return Internal("NVDEC's parser chose decode surface ", i, " (out of range)");
    }
    if (surfaces_[i].busy) {
      // Its output is still mapped: wait for the work on it, then unmap.
      bool mapped = false;
      for (const Mapped& m : mapped_) mapped = mapped || m.surface == i;
      if (!mapped) return Internal("NVDEC's parser reused decode surface ", i, " before displaying it");
      while (surfaces_[i].busy) BZNA_GPU_RETURN_IF_ERROR(ReleaseOldest());
    }
    const Status s = CheckPicture(d_, v_.cuvidDecodePicture(current_->handle, picture), "cuvidDecodePicture");
    if (!s.ok()) {
      current_->broken = true;
      return s;
    }
    surfaces_[i] = Surface{true, sample, current_, left_, top_, width_, height_};
    return Status();
  }

  static int CUDAAPI DisplayCallback(void* self, CUVIDPARSERDISPINFO* info) {
    auto* me = static_cast<NvdecSession*>(self);
    if (info == nullptr) return 1;  // end of stream
    if (!me->error_.ok()) return 0;
    const int i = info->picture_index;
    if (i < 0 || i >= static_cast<int>(kMaxDecodeSurfaces) || !me->surfaces_[i].busy) {
      me->Fail(-1, Internal("NVDEC displayed decode surface ", i, ", which holds no picture"));
      return 0;
    }
    const Status s = me->Output(i);
    if (!s.ok()) {
      me->Fail(me->surfaces_[i].sample, s);
      return 0;
    }
    return 1;
  }

  // Maps surface i, checks how its decode went, hands it to the sink and
  // queues its unmapping behind the sink's work.
  Status Output(int i) {
    Surface& f = surfaces_[i];
    while (mapped_.size() >= kOutputSurfaces) BZNA_GPU_RETURN_IF_ERROR(ReleaseOldest());
    CUVIDPROCPARAMS proc;
    std::memset(&proc, 0, sizeof(proc));
    proc.progressive_frame = 1;
    proc.output_stream = stream_;
    CUdeviceptr ptr = 0;
    unsigned pitch = 0;
    Status s = Check(d_, v_.cuvidMapVideoFrame(f.decoder->handle, i, &ptr, &pitch, &proc), "cuvidMapVideoFrame");
    if (!s.ok()) {
      f.busy = false;
      return s;
    }
    // Only known once the decode is done, which the map waited for.
    if (v_.cuvidGetDecodeStatus != nullptr) {
      CUVIDGETDECODESTATUS status;
      std::memset(&status, 0, sizeof(status));
      if (v_.cuvidGetDecodeStatus(f.decoder->handle, i, &status) == CUDA_SUCCESS &&
          (status.decodeStatus == cuvidDecodeStatus_Error ||
           status.decodeStatus == cuvidDecodeStatus_Error_Concealed)) {
        s = InvalidArgument("NVDEC could not decode the picture (corrupt H.265 data; decode status ",
                            static_cast<int>(status.decodeStatus), ")");
      }
    }
    if (s.ok()) {
      NvdecFrame frame;
      // NV12: the CbCr rows follow the surface's luma rows (its height
      // rounded up to even); the conformance window's offsets are even in 4:2:0.
      const CUdeviceptr chroma = ptr + static_cast<CUdeviceptr>(pitch) * ((f.decoder->coded_height + 1) & ~1u);
      frame.luma = ptr + static_cast<CUdeviceptr>(pitch) * f.top + f.left;
      frame.chroma = chroma + static_cast<CUdeviceptr>(pitch) * (f.top / 2) + f.left;
      frame.pitch = pitch;
      frame.width = f.width;
      frame.height = f.height;
      s = (*sink_)(f.sample, frame, stream_);
    }
    Mapped m{i, ptr, SpareEvent()};
    const Status recorded = m.done->Record(stream_);
    if (s.ok()) s = recorded;
    if (!recorded.ok()) {
      // Without an event, wait for the whole stream before unmapping.
      d_.cu->cuStreamSynchronize(stream_);
      v_.cuvidUnmapVideoFrame(f.decoder->handle, ptr);
      f.busy = false;
      return s;
    }
    mapped_.push_back(std::move(m));
    if (s.ok()) ++output_;
    return s;
  }

  Status ReleaseOldest() {
    Mapped& m = mapped_.front();
    Surface& f = surfaces_[m.surface];
    Status s = m.done->Synchronize();
    const Status unmapped = Check(d_, v_.cuvidUnmapVideoFrame(f.decoder->handle, m.ptr), "cuvidUnmapVideoFrame");
    if (s.ok()) s = unmapped;
    f.busy = false;
    spare_events_.push_back(std::move(m.done));
    mapped_.pop_front();
    return s;
  }

  // An event for a mapped frame: a released one when there is one (no
  // cuEventCreate per picture).
  std::unique_ptr<Event> SpareEvent() {
    if (spare_events_.empty()) return std::make_unique<Event>(d_);
    std::unique_ptr<Event> e = std::move(spare_events_.back());
    spare_events_.pop_back();
    return e;
  }

  // Waits for all work on mapped frames and unmaps them (also after errors).
  Status ReleaseAll() {
    Status first;
    while (!mapped_.empty()) {
      const Status s = ReleaseOldest();
      if (first.ok()) first = s;
    }
    return first;
  }

  const Driver& d_;
  const CuvidFunctions& v_;
  const NvdecCaps& caps_;
  CUvideoctxlock lock_ = nullptr;
  CUstream stream_ = nullptr;
  CUvideoparser parser_ = nullptr;
  std::vector<std::unique_ptr<Decoder>> decoders_;
  uint64_t tick_ = 0;
  // The current sequence (set by the sequence callback).
  Decoder* current_ = nullptr;
  int left_ = 0, top_ = 0, width_ = 0, height_ = 0;
  Surface surfaces_[kMaxDecodeSurfaces];
  std::deque<Mapped> mapped_;
  std::vector<std::unique_ptr<Event>> spare_events_;  // at most kOutputSurfaces
  // The batch.
  const FrameSink* sink_ = nullptr;
  int64_t feeding_ = -1;
  std::deque<int64_t> awaiting_;  // fed samples whose picture is not decoded yet, in order
  bool immediate_ = false;        // the parser decodes a picture in the call that feeds it
  int64_t late_ = -1;             // the first sample whose call decoded nothing although immediate_
  int64_t fed_ = 0, output_ = 0;
  Status error_;
  int64_t error_sample_ = -1;
};

StatusOr<NvdecPool*> NvdecPool::ForContext(const Driver& d, CUcontext context) {
  if (d.cuvid == nullptr) return Unavailable(d.cuvid_error);
  static std::mutex mu;
  static auto* pools = new std::map<CUcontext, NvdecPool*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = pools->find(context);
  if (it != pools->end()) return it->second;
  auto* pool = new NvdecPool(d, context);
  if (d.cuvid->cuvidGetDecoderCaps == nullptr) {
    delete pool;
    return Unavailable("the NVIDIA driver's libnvcuvid.so.1 has no cuvidGetDecoderCaps: the driver is too old");
  }
  CUVIDDECODECAPS caps;
  std::memset(&caps, 0, sizeof(caps));
  caps.eCodecType = cudaVideoCodec_HEVC;
  caps.eChromaFormat = cudaVideoChromaFormat_420;
  caps.nBitDepthMinus8 = 0;
  const Status s = Check(d, d.cuvid->cuvidGetDecoderCaps(&caps), "cuvidGetDecoderCaps");
  if (!s.ok()) {
    delete pool;
    return s;
  }
  if (!caps.bIsSupported) {
    delete pool;
    return Unavailable("this GPU's NVDEC does not decode 8-bit 4:2:0 H.265 (cuvidGetDecoderCaps)");
  }
  NvdecCaps& c = pool->caps_;
  c.supported = true;
  c.engines = caps.nNumNVDECs;
  c.min_width = caps.nMinWidth;
  c.min_height = caps.nMinHeight;
  c.max_width = caps.nMaxWidth;
  c.max_height = caps.nMaxHeight;
  c.max_mb_count = caps.nMaxMBCount;
  c.nv12 = (caps.nOutputFormatMask & (1 << cudaVideoSurfaceFormat_NV12)) != 0;
  if (!c.nv12) {
    delete pool;
    return Unavailable("this GPU's NVDEC cannot output NV12 surfaces for H.265 (cuvidGetDecoderCaps)");
  }
  (*pools)[context] = pool;
  return pool;
}

int NvdecPool::SessionsFor(int64_t count) const {
  const int wanted = g_sessions.load() > 0 ? g_sessions.load() : DefaultSessions(caps_.engines);
  return static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(wanted, count)));
}

Status NvdecPool::DecodeBatch(const uint8_t* const* pictures, const uint64_t* sizes, int64_t count,
                              CUstream after, const FrameSink& sink) {
  if (count == 0) return Status();
  std::lock_guard<std::mutex> lock(mu_);
  const int n = SessionsFor(count);
  while (static_cast<int>(sessions_.size()) < n) {
    auto session = std::make_unique<NvdecSession>(d_, caps_);
    BZNA_GPU_RETURN_IF_ERROR(session->Init(context_));
    sessions_.push_back(session.release());  // kept with the pool
  }
  // The sessions' streams start after the caller's queued work (which may
  // still be writing the output's memory or the matrices).
  // With no caller stream, after the default stream's work (e.g. an upload of
  // the matrices, which the non-blocking session streams would not wait for).
  Event start(d_);
  BZNA_GPU_RETURN_IF_ERROR(start.Record(after));
  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  auto run = [&](NvdecSession* s) { s->Run(pictures, sizes, count, &next, &stop, &start, &sink); };
  if (n == 1) {
    run(sessions_[0]);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(n);
    for (int i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        ScopedContext current(d_, context_);
        if (current.status().ok()) {
          run(sessions_[i]);
        } else {
          sessions_[i]->SetFailed(current.status());
          stop.store(true);
        }
      });
    }
    for (std::thread& t : threads) t.join();
  }
  // The lowest failing sample's error (a session that failed before any
  // sample reports -1, which sorts first).
  const NvdecSession* failed = nullptr;
  for (int i = 0; i < n; ++i) {
    const NvdecSession* s = sessions_[i];
    if (!s->error().ok() && (failed == nullptr || s->error_sample() < failed->error_sample())) failed = s;
  }
  if (failed == nullptr) return Status();
  if (failed->error_sample() < 0) return failed->error();
  return failed->error().Prefixed(Cat("sample ", failed->error_sample(), " of the batch: "));
}

}  // namespace gpu
}  // namespace bzna_tf
