// H.265 decoding with NVDEC, the GPU's hardware video decoder, pipelined.
//
// A pool per CUDA context holds decoder *sessions*. A batch is spread over
// them: each session is a host thread with its own NVDEC parser, its own
// decoders (one per coded size, cached) and its own CUDA stream, and pulls the
// next picture of the batch from a shared counter. Within a session, pictures
// are submitted without waiting: the parser displays a picture only once
// kDisplayDelay later ones are submitted, so the engine always has work
// queued. A displayed picture is mapped (post-processed into an NV12 output
// surface on the session's stream), handed to the caller's sink (which
// enqueues a kernel reading it on the same stream) and unmapped only when an
// event says that work is done. The host waits on blocking-sync events, so
// waiting costs no CPU time, and once per session at the end of a batch.
//
// Limits (per session): kDecodeSurfaces decode surfaces and kOutputSurfaces
// mapped output surfaces per decoder; between batches the 4 most recently used
// decoders are kept, and up to 16 while their coded area is within 8 frames
// of 512 x 512 (least recently used dropped; nvdec.cc); a 512 x 512 decoder
// holds about (16 + 8) x 0.4 MB = 9 MB of GPU memory. Sessions: the GPU's NVDEC
// engine count by default (H100: 7), $BZNA_GPU_NVDEC_SESSIONS or
// bzna_gpu_set_nvdec_sessions() otherwise. One batch at a time per context.

#ifndef BZNA_TF_GPU_CORE_NVDEC_H_
#define BZNA_TF_GPU_CORE_NVDEC_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gpu/core/driver.h"
#include "gpu/core/status.h"

namespace bzna_tf {
namespace gpu {

// A decoded picture as NVDEC maps it, cropped to the SPS conformance window
// (the frame FFmpeg's decoder outputs): 8-bit luma (width x height) and
// interleaved CbCr (width/2 pairs x height/2), rows `pitch` bytes apart.
struct NvdecFrame {
  CUdeviceptr luma = 0;
  CUdeviceptr chroma = 0;
  unsigned pitch = 0;
  int width = 0;
  int height = 0;
};

// Receives each decoded picture of a batch, on its session's thread with the
// context current; enqueues work reading `frame` on `stream` (the frame stays
// mapped until that work is done). Must be safe to call from several threads.
using FrameSink = std::function<Status(int64_t sample, const NvdecFrame& frame, CUstream stream)>;

// What NVDEC on this GPU decodes (8-bit 4:2:0 H.265), from cuvidGetDecoderCaps.
struct NvdecCaps {
  bool supported = false;
  int engines = 0;
  unsigned min_width = 0, min_height = 0, max_width = 0, max_height = 0, max_mb_count = 0;
  bool nv12 = false;
};

class NvdecSession;

class NvdecPool {
 public:
  // The pool of `context`, which must be current.
  static StatusOr<NvdecPool*> ForContext(const Driver& d, CUcontext context);

  // Decodes pictures[0, count) and hands each to `sink`; the work starts
  // after what is queued on `after` (may be null). Returns when every sink's
  // work is done and every frame unmapped. The error, if any, is the lowest
  // failing sample's: "sample 3 of the batch: ...".
  Status DecodeBatch(const uint8_t* const* pictures, const uint64_t* sizes, int64_t count, CUstream after,
                     const FrameSink& sink);

  const NvdecCaps& caps() const { return caps_; }
  // Sessions a batch of `count` pictures would use.
  int SessionsFor(int64_t count) const;

 private:
  NvdecPool(const Driver& d, CUcontext context) : d_(d), context_(context) {}
  ~NvdecPool() = default;  // pools live as long as the process, like their contexts

  const Driver& d_;
  CUcontext context_;
  NvdecCaps caps_;
  std::mutex mu_;  // one batch at a time
  std::vector<NvdecSession*> sessions_;
};

// Sessions per batch: 0 = the default ($BZNA_GPU_NVDEC_SESSIONS, else the
// engine count).
void SetNvdecSessions(int sessions);

}  // namespace gpu
}  // namespace bzna_tf

#endif  // BZNA_TF_GPU_CORE_NVDEC_H_
