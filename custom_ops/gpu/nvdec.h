// H.265 decoding with NVDEC, the GPU's hardware video decoder.
//
// One decoder per CUDA context, reused across pictures and batches: created
// at the first picture's size, reconfigured (not recreated) for a new size
// that fits its maximum, recreated larger otherwise. Each .bzna picture is a
// stream of its own (one intra picture, Annex-B); the NVDEC parser reads it,
// the decoder writes an NV12 surface, and the caller's function runs on the
// mapped surface (device memory) before it is unmapped: no host round trip.

#ifndef BZNA_TF_GPU_NVDEC_H_
#define BZNA_TF_GPU_NVDEC_H_

#include <functional>
#include <mutex>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "gpu/driver.h"

namespace bzna_tf {
namespace gpu {

// A decoded picture as NVDEC maps it: 8-bit luma (width x height) and
// interleaved CbCr (width/2 pairs x height/2), rows `pitch` bytes apart.
struct NvdecFrame {
  CUdeviceptr luma = 0;
  CUdeviceptr chroma = 0;
  unsigned pitch = 0;
  int width = 0;   // the frame's size after the SPS conformance window,
  int height = 0;  // as FFmpeg's decoder outputs it
};

class NvdecDecoder {
 public:
  // The decoder of `context`; callers hold mutex() while they use it, with
  // `context` current.
  static absl::StatusOr<NvdecDecoder*> ForContext(const Driver& d, CUcontext context);

  std::mutex& mutex() { return mu_; }

  // Decodes one Annex-B picture, then calls on_frame (which may enqueue work
  // on `stream` reading the frame), waits for `stream`, and unmaps the frame.
  absl::Status Decode(absl::string_view annexb, CUstream stream,
                      const std::function<absl::Status(const NvdecFrame&)>& on_frame);

 private:
  NvdecDecoder(const Driver& d, CUcontext context) : d_(d), context_(context) {}
  absl::Status Init();
  int OnSequence(CUVIDEOFORMAT* format);
  static int CUDAAPI SequenceCallback(void* self, CUVIDEOFORMAT* format);
  static int CUDAAPI DecodeCallback(void* self, CUVIDPICPARAMS* picture);
  static int CUDAAPI DisplayCallback(void* self, CUVIDPARSERDISPINFO* info);

  const Driver& d_;
  CUcontext context_;
  CUvideoctxlock lock_ = nullptr;
  CUvideodecoder decoder_ = nullptr;
  std::mutex mu_;
  // The decoder's configuration.
  unsigned coded_width_ = 0, coded_height_ = 0, max_width_ = 0, max_height_ = 0;
  int left_ = 0, top_ = 0, width_ = 0, height_ = 0;
  unsigned surfaces_ = 0;
  // The picture being decoded.
  absl::Status error_;
  int displayed_ = -1;
};

}  // namespace gpu
}  // namespace bzna_tf

#endif  // BZNA_TF_GPU_NVDEC_H_
