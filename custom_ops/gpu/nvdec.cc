#include "gpu/nvdec.h"

#include <algorithm>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"

namespace bzna_tf {
namespace gpu {

namespace {

// Sets one of NVDEC's (left, top, right, bottom) rectangles of shorts.
template <typename Rect>
void SetRect(Rect* r, int left, int top, int width, int height) {
  r->left = static_cast<short>(left);
  r->top = static_cast<short>(top);
  r->right = static_cast<short>(left + width);
  r->bottom = static_cast<short>(top + height);
}

}  // namespace

absl::StatusOr<NvdecDecoder*> NvdecDecoder::ForContext(const Driver& d, CUcontext context) {
  if (d.cuvid == nullptr) return absl::FailedPreconditionError(d.cuvid_error);
  static std::mutex mu;
  static auto* decoders = new std::map<CUcontext, NvdecDecoder*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = decoders->find(context);
  if (it != decoders->end()) return it->second;
  auto* decoder = new NvdecDecoder(d, context);
  const absl::Status s = decoder->Init();
  if (!s.ok()) {
    delete decoder;
    return s;
  }
  (*decoders)[context] = decoder;  // lives as long as the process, like the context
  return decoder;
}

absl::Status NvdecDecoder::Init() {
  return Check(d_, d_.cuvid->cuvidCtxLockCreate(&lock_, context_), "cuvidCtxLockCreate");
}

int CUDAAPI NvdecDecoder::SequenceCallback(void* self, CUVIDEOFORMAT* format) {
  return static_cast<NvdecDecoder*>(self)->OnSequence(format);
}

int NvdecDecoder::OnSequence(CUVIDEOFORMAT* f) {
  if (f->codec != cudaVideoCodec_HEVC || f->chroma_format != cudaVideoChromaFormat_420 ||
      f->bit_depth_luma_minus8 != 0 || f->bit_depth_chroma_minus8 != 0) {
    error_ = absl::InvalidArgumentError(absl::StrCat(
        "expected an 8-bit 4:2:0 H.265 picture. Received codec ", static_cast<int>(f->codec), ", chroma format ",
        static_cast<int>(f->chroma_format), ", bit depth ", 8 + f->bit_depth_luma_minus8));
    return 0;
  }
  const int left = f->display_area.left, top = f->display_area.top;
  const int width = f->display_area.right - left, height = f->display_area.bottom - top;
  if (width <= 0 || height <= 0) {
    error_ = absl::InvalidArgumentError(absl::StrCat("the picture's display area is empty (", width, "x", height, ")"));
    return 0;
  }
  const unsigned surfaces = std::max<unsigned>(f->min_num_decode_surfaces, 1);
  const bool same = decoder_ != nullptr && f->coded_width == coded_width_ && f->coded_height == coded_height_ &&
                    left == left_ && top == top_ && width == width_ && height == height_ && surfaces <= surfaces_;
  if (same) return static_cast<int>(surfaces_);
  absl::Status s;
  if (decoder_ != nullptr && f->coded_width <= max_width_ && f->coded_height <= max_height_ &&
      surfaces <= surfaces_) {
    CUVIDRECONFIGUREDECODERINFO r;
    std::memset(&r, 0, sizeof(r));
    r.ulWidth = f->coded_width;
    r.ulHeight = f->coded_height;
    r.ulTargetWidth = width;
    r.ulTargetHeight = height;
    r.ulNumDecodeSurfaces = surfaces_;
    SetRect(&r.display_area, left, top, width, height);
    s = Check(d_, d_.cuvid->cuvidReconfigureDecoder(decoder_, &r), "cuvidReconfigureDecoder");
  } else {
    if (decoder_ != nullptr) {
      d_.cuvid->cuvidDestroyDecoder(decoder_);
      decoder_ = nullptr;
    }
    // Grow, never shrink: a later, larger picture then only reconfigures.
    max_width_ = std::max(max_width_, f->coded_width);
    max_height_ = std::max(max_height_, f->coded_height);
    surfaces_ = std::max(surfaces_, surfaces);
    CUVIDDECODECREATEINFO c;
    std::memset(&c, 0, sizeof(c));
    c.ulWidth = f->coded_width;
    c.ulHeight = f->coded_height;
    c.ulNumDecodeSurfaces = surfaces_;
    c.CodecType = cudaVideoCodec_HEVC;
    c.ChromaFormat = cudaVideoChromaFormat_420;
    c.ulCreationFlags = cudaVideoCreate_PreferCUVID;
    c.bitDepthMinus8 = 0;
    c.ulIntraDecodeOnly = 1;  // .bzna pictures are intra pictures
    c.ulMaxWidth = max_width_;
    c.ulMaxHeight = max_height_;
    SetRect(&c.display_area, left, top, width, height);
    c.OutputFormat = cudaVideoSurfaceFormat_NV12;
    c.DeinterlaceMode = cudaVideoDeinterlaceMode_Weave;
    c.ulTargetWidth = width;
    c.ulTargetHeight = height;
    c.ulNumOutputSurfaces = 1;
    c.vidLock = lock_;
    s = Check(d_, d_.cuvid->cuvidCreateDecoder(&decoder_, &c), "cuvidCreateDecoder");
    if (!s.ok()) decoder_ = nullptr;
  }
  if (!s.ok()) {
    error_ = absl::Status(s.code(), absl::StrCat(s.message(), " for a ", f->coded_width, "x", f->coded_height,
                                                 " H.265 picture"));
    return 0;
  }
  coded_width_ = f->coded_width;
  coded_height_ = f->coded_height;
  left_ = left;
  top_ = top;
  width_ = width;
  height_ = height;
  return static_cast<int>(surfaces_);
}

int CUDAAPI NvdecDecoder::DecodeCallback(void* self, CUVIDPICPARAMS* picture) {
  auto* me = static_cast<NvdecDecoder*>(self);
  if (me->decoder_ == nullptr) {
    me->error_ = absl::InvalidArgumentError("a picture came before its sequence parameters");
    return 0;
  }
  const absl::Status s = Check(me->d_, me->d_.cuvid->cuvidDecodePicture(me->decoder_, picture), "cuvidDecodePicture");
  if (!s.ok()) {
    me->error_ = s;
    return 0;
  }
  return 1;
}

int CUDAAPI NvdecDecoder::DisplayCallback(void* self, CUVIDPARSERDISPINFO* info) {
  if (info != nullptr) static_cast<NvdecDecoder*>(self)->displayed_ = info->picture_index;
  return 1;
}

absl::Status NvdecDecoder::Decode(absl::string_view annexb, CUstream stream,
                                  const std::function<absl::Status(const NvdecFrame&)>& on_frame) {
  const CuvidFunctions& v = *d_.cuvid;
  error_ = absl::OkStatus();
  displayed_ = -1;
  CUVIDPARSERPARAMS params;
  std::memset(&params, 0, sizeof(params));
  params.CodecType = cudaVideoCodec_HEVC;
  params.ulMaxNumDecodeSurfaces = std::max(surfaces_, 1u);
  params.ulMaxDisplayDelay = 0;
  params.pUserData = this;
  params.pfnSequenceCallback = SequenceCallback;
  params.pfnDecodePicture = DecodeCallback;
  params.pfnDisplayPicture = DisplayCallback;
  // A parser per picture (cheap, host only): each picture is a whole stream.
  CUvideoparser parser = nullptr;
  BZNA_RETURN_IF_ERROR(Check(d_, v.cuvidCreateVideoParser(&parser, &params), "cuvidCreateVideoParser"));
  CUVIDSOURCEDATAPACKET packet;
  std::memset(&packet, 0, sizeof(packet));
  packet.payload = reinterpret_cast<const unsigned char*>(annexb.data());
  packet.payload_size = annexb.size();
  packet.flags = CUVID_PKT_ENDOFSTREAM | CUVID_PKT_ENDOFPICTURE;
  const CUresult parsed = v.cuvidParseVideoData(parser, &packet);
  v.cuvidDestroyVideoParser(parser);
  if (!error_.ok()) return error_;
  BZNA_RETURN_IF_ERROR(Check(d_, parsed, "cuvidParseVideoData"));
  if (displayed_ < 0) {
    return absl::InvalidArgumentError("NVDEC found no picture in the data (not an H.265 Annex-B picture?)");
  }
  if (v.cuvidGetDecodeStatus != nullptr) {
    CUVIDGETDECODESTATUS status;
    std::memset(&status, 0, sizeof(status));
    if (v.cuvidGetDecodeStatus(decoder_, displayed_, &status) == CUDA_SUCCESS &&
        (status.decodeStatus == cuvidDecodeStatus_Error ||
         status.decodeStatus == cuvidDecodeStatus_Error_Concealed)) {
      return absl::InvalidArgumentError("NVDEC could not decode the picture (corrupt H.265 data)");
    }
  }
  CUVIDPROCPARAMS proc;
  std::memset(&proc, 0, sizeof(proc));
  proc.progressive_frame = 1;
  proc.output_stream = stream;
  CUdeviceptr surface = 0;
  unsigned pitch = 0;
  BZNA_RETURN_IF_ERROR(
      Check(d_, v.cuvidMapVideoFrame(decoder_, displayed_, &surface, &pitch, &proc), "cuvidMapVideoFrame"));
  NvdecFrame frame;
  frame.luma = surface;
  // The CbCr plane follows the luma rows, the surface height rounded up to even.
  frame.chroma = surface + static_cast<CUdeviceptr>(pitch) * ((height_ + 1) & ~1);
  frame.pitch = pitch;
  frame.width = width_;
  frame.height = height_;
  absl::Status s = on_frame(frame);
  const absl::Status synced = Check(d_, d_.cu->cuStreamSynchronize(stream), "cuStreamSynchronize");
  const absl::Status unmapped = Check(d_, v.cuvidUnmapVideoFrame(decoder_, surface), "cuvidUnmapVideoFrame");
  if (s.ok()) s = synced;
  if (s.ok()) s = unmapped;
  return s;
}

}  // namespace gpu
}  // namespace bzna_tf
