/* bzna_gpu: NVDEC decode + CUDA warp behind a C ABI.
 *
 * The GPU core of bzna_tf, with no TensorFlow and no absl: the TensorFlow GPU
 * kernels (custom_ops/gpu/tf_*.cc) call it, and so does the GPU kit
 * (tools/gpu_kit in a checkout), which proves it on machines that have a GPU
 * but no TensorFlow. It loads libcuda.so.1 and libnvcuvid.so.1 with dlopen at
 * run time and links neither: it loads anywhere, and says why it cannot run.
 *
 * Conventions
 * - Every function returns a BZNA_GPU_* status; on failure the reason is in
 *   bzna_gpu_last_error() (per thread, valid until the next call on it).
 *   Argument checks come first, so they work without a GPU or driver.
 * - Pictures are Annex-B H.265 pictures (one intra picture each, parameter
 *   sets first: what a .bzna sample becomes, see SPEC section 2) in host
 *   memory: NVDEC's parser reads them on the CPU.
 * - Matrices: `matrix_count` 3x3 row-major float32 matrices mapping OUTPUT
 *   pixel indices to SOURCE pixel indices; matrix_count is 1 (the same matrix
 *   for every sample) or `count`.
 * - Output: float32 [count, H, W, 3], or [count, 3, H, W] with
 *   channels_first; out[c] = (rgb[c] - bias[c]) * norm[c] inside the source
 *   picture's area ([-0.5, W - 0.5] x [-0.5, H - 0.5] in pixel-centre
 *   coordinates, sampled with fetches clamped to the edge), oob[c] (raw)
 *   outside (SPEC section 4, whose [0, W - 1] bounds bzna_tf widens on
 *   purpose: custom_ops/lib/warp.h). With params->antialias, pixels
 *   where the matrix reduces average a footprint of bilinear taps instead of
 *   sampling a point (custom_ops/lib/warp.h, "Antialiasing"), as the CPU ops
 *   do with their `antialias` attribute.
 * - ABI history: version 2 added bzna_gpu_warp_params.antialias; version 3
 *   added the picture_sizes argument of bzna_gpu_decode_warp(_host); version
 *   4 added the asynchronous queue (bzna_gpu_queue_*, bzna_gpu_submit,
 *   bzna_gpu_collect, bzna_gpu_release, bzna_gpu_ticket_failure).
 * - Device pointers: `device` is a CUDA device ordinal; with stream == NULL
 *   the call uses that device's primary context (the one CUDA runtime users,
 *   e.g. PyTorch, share) and returns when the results are written. With a
 *   stream (a CUstream), `device` is ignored: the work runs in the stream's
 *   context, after what is already queued on the stream. Decoding functions
 *   return when their results are written; warp-only functions only enqueue.
 * - *_host variants take and fill host memory and copy for you (synchronous).
 */

#ifndef BZNA_TF_GPU_CORE_BZNA_GPU_H_
#define BZNA_TF_GPU_CORE_BZNA_GPU_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BZNA_GPU_ABI_VERSION 4

/* Status codes. */
#define BZNA_GPU_OK 0
#define BZNA_GPU_INVALID_ARGUMENT 1 /* bad arguments, or data NVDEC cannot decode */
#define BZNA_GPU_UNAVAILABLE 2      /* no driver, no GPU, or no NVDEC */
#define BZNA_GPU_INTERNAL 3         /* a CUDA or NVDEC call failed */
#define BZNA_GPU_OUT_OF_MEMORY 4    /* GPU memory ran out */
#define BZNA_GPU_CANCELLED 5        /* the queue was destroyed before the batch ran */

/* bzna_gpu_probe() bits. */
#define BZNA_GPU_HAS_CUDA 1
#define BZNA_GPU_HAS_NVDEC 2

/* bzna_gpu_warp_rgb() dtypes. */
#define BZNA_GPU_UINT8 0
#define BZNA_GPU_FLOAT32 1

typedef struct bzna_gpu_warp_params {
  int32_t out_height; /* 1 .. 2^24 */
  int32_t out_width;  /* 1 .. 2^24 */
  float bias[3];
  float norm[3];
  float oob[3];           /* raw colour outside the source (no bias, no norm) */
  int32_t channels_first; /* 0: [N, H, W, 3]; 1: [N, 3, H, W] */
  int32_t antialias;      /* 1: filter where the matrix reduces (lib/warp.h); 0: SPEC section 4's point sampling */
} bzna_gpu_warp_params;

int bzna_gpu_abi_version(void);

/* The reason the last failed call on this thread failed ("" if none). */
const char* bzna_gpu_last_error(void);

/* What this machine offers: BZNA_GPU_HAS_CUDA (driver loaded, initialised,
 * at least one GPU) | BZNA_GPU_HAS_NVDEC (libnvcuvid loaded too). When a bit
 * is missing, bzna_gpu_last_error() says why. Creates no CUDA context. */
int bzna_gpu_probe(void);

/* Writes a JSON object describing `device` (name, compute capability, driver
 * version, the kernel image chosen, NVDEC engines, sessions and limits) into
 * buf (NUL-terminated, truncated to len). Creates the device's primary
 * context if needed. */
int bzna_gpu_describe(int device, char* buf, uint64_t len);

/* Decoder sessions used per batch (each: a host thread, an NVDEC parser and
 * decoders, a CUDA stream). 0 restores the default: $BZNA_GPU_NVDEC_SESSIONS,
 * else the number of NVDEC engines the GPU reports (at least 1, at most 16). */
int bzna_gpu_set_nvdec_sessions(int sessions);

/* Decode `count` pictures and warp each with its matrix into `out`.
 * picture_sizes: host memory, int32 [count, 2], each picture's (height,
 * width) at the top-left of its decoded frame (a .bzna track's size: the
 * benzina layout pads pictures to frames of multiples of 512), or NULL for the
 * decoded frames' own sizes. The warp's source is that picture: outside it is
 * oob on every side, and fetches clamp to its last row and column, never
 * reading the frame beyond. A size below 1, or above the decoded frame's, is
 * an error about that sample. matrices and out: device memory. Errors name
 * the sample ("sample 3 of the batch: ...") and what failed. */
int bzna_gpu_decode_warp(int device, void* stream, const uint8_t* const* pictures,
                         const uint64_t* sizes, int64_t count, const float* matrices,
                         int64_t matrix_count, const int32_t* picture_sizes,
                         const bzna_gpu_warp_params* params, float* out);
int bzna_gpu_decode_warp_host(int device, const uint8_t* const* pictures,
                              const uint64_t* sizes, int64_t count,
                              const float* matrices, int64_t matrix_count,
                              const int32_t* picture_sizes,
                              const bzna_gpu_warp_params* params, float* out);

/* Decode only: sample n's planes go to the top-left corner of slot n of
 * y [count, max_height, max_width], cb and cr [count, (max_height + 1) / 2,
 * (max_width + 1) / 2] (uint8; the rest of a slot is left as it was), and
 * its decoded size (height, width) to frame_sizes[2n], frame_sizes[2n + 1]
 * (host memory). A frame larger than the slot is an error. y, cb, cr:
 * device memory. */
int bzna_gpu_decode_yuv(int device, void* stream, const uint8_t* const* pictures,
                        const uint64_t* sizes, int64_t count, int32_t max_height,
                        int32_t max_width, uint8_t* y, uint8_t* cb, uint8_t* cr,
                        int32_t* frame_sizes);
int bzna_gpu_decode_yuv_host(int device, const uint8_t* const* pictures,
                             const uint64_t* sizes, int64_t count, int32_t max_height,
                             int32_t max_width, uint8_t* y, uint8_t* cb, uint8_t* cr,
                             int32_t* frame_sizes);

/* Warp only, from planar 4:2:0 frames: y [count, height, width], cb and cr
 * [count, (height + 1) / 2, (width + 1) / 2], uint8. Device memory. */
int bzna_gpu_warp_yuv420(int device, void* stream, const uint8_t* y, const uint8_t* cb,
                         const uint8_t* cr, int64_t count, int32_t height, int32_t width,
                         const float* matrices, int64_t matrix_count,
                         const bzna_gpu_warp_params* params, float* out);
int bzna_gpu_warp_yuv420_host(int device, const uint8_t* y, const uint8_t* cb,
                              const uint8_t* cr, int64_t count, int32_t height,
                              int32_t width, const float* matrices, int64_t matrix_count,
                              const bzna_gpu_warp_params* params, float* out);

/* Warp only, from interleaved RGB images [count, height, width, 3] of dtype
 * BZNA_GPU_UINT8 (interpolated values rounded and clamped like decoded
 * pixels) or BZNA_GPU_FLOAT32 (left as interpolated). Device memory. */
int bzna_gpu_warp_rgb(int device, void* stream, const void* images, int32_t dtype,
                      int64_t count, int32_t height, int32_t width, const float* matrices,
                      int64_t matrix_count, const bzna_gpu_warp_params* params, float* out);
int bzna_gpu_warp_rgb_host(int device, const void* images, int32_t dtype, int64_t count,
                           int32_t height, int32_t width, const float* matrices,
                           int64_t matrix_count, const bzna_gpu_warp_params* params,
                           float* out);

/* Writes params->oob (raw) into every pixel of `count` consecutive output
 * samples at `out` (device memory), after the work queued on `stream`; returns
 * when written. What a picture that failed to decode becomes when the caller
 * skips it. */
int bzna_gpu_fill_oob(int device, void* stream, int64_t count, const bzna_gpu_warp_params* params,
                      float* out);

/* ------------------------------------------------------------------------
 * Asynchronous batches (ABI version 4)
 *
 * A queue decodes and warps batches in the background, on its own worker
 * thread and the core's own decoder sessions and streams, while the caller
 * consumes earlier ones (trains on them): submit returns at once with a
 * ticket, collect waits for that ticket's batch. Memory is bounded: at most
 * `depth` batches are in flight (submitted and not yet released), and the
 * queue owns a ring of `depth` output buffers.
 *
 * Threading: one queue may be used from several threads; tickets are
 * numbered from 0 in submission order, batches are decoded in that order,
 * and may be collected in any order, each once (a second collect, or a
 * ticket never submitted or already finished, is BZNA_GPU_INVALID_ARGUMENT).
 * A stream given to collect or release must belong to the queue's context
 * (BZNA_GPU_INVALID_ARGUMENT otherwise). No call on a queue may start once
 * bzna_gpu_queue_destroy() has been called on it.
 */
typedef struct bzna_gpu_queue bzna_gpu_queue;

/* bzna_gpu_submit() flags. */
#define BZNA_GPU_SKIP_BAD 1 /* a picture that fails to decode does not fail its batch */

/* A queue on `device`'s primary context, at most `depth` (1 .. 64) batches in
 * flight. Creates the context and the worker thread; allocates no output
 * buffer yet (the ring grows to the largest batch submitted). Fails with
 * BZNA_GPU_UNAVAILABLE where there is no driver, GPU or NVDEC. */
int bzna_gpu_queue_create(int device, int32_t depth, bzna_gpu_queue** queue);

/* Cancels the batches not yet started (their tickets end with
 * BZNA_GPU_CANCELLED), waits for the one being decoded, and frees the ring,
 * the thread and the queue, also with batches in flight or uncollected. A
 * thread blocked in submit or collect on this queue returns
 * BZNA_GPU_CANCELLED first. Ring buffers lent by bzna_gpu_collect() (ring_out)
 * are freed too: stop reading them first (copies into `out` already queued on
 * a stream are waited for). NULL is a no-op. */
int bzna_gpu_queue_destroy(bzna_gpu_queue* queue);

/* Submits a batch and returns at once with *ticket, or blocks while `depth`
 * batches are in flight until one is released. Everything is HOST memory
 * and copied before the call returns (the pictures' bytes too): the caller's
 * buffers may be reused on return. Arguments as bzna_gpu_decode_warp's, with
 * `matrices` in host memory. Argument errors are returned here (no ticket is
 * taken); decoding errors belong to the ticket (bzna_gpu_collect). flags: 0
 * or BZNA_GPU_SKIP_BAD (a picture that fails to decode, or whose
 * picture_sizes exceed its frame, becomes params->oob in every pixel and is
 * listed by bzna_gpu_ticket_failure; the batch succeeds. Only data errors
 * (BZNA_GPU_INVALID_ARGUMENT) are skipped: a CUDA or NVDEC failure still
 * fails the ticket). An empty batch (count 0) is a ticket that succeeds. */
int bzna_gpu_submit(bzna_gpu_queue* queue, const uint8_t* const* pictures, const uint64_t* sizes,
                    int64_t count, const float* matrices, int64_t matrix_count,
                    const int32_t* picture_sizes, const bzna_gpu_warp_params* params,
                    int32_t flags, int64_t* ticket);

/* Waits (blocking sync: no CPU spent spinning) until `ticket`'s batch is
 * written and returns its status: a decoding error ("sample 3 of the batch:
 * ...") fails this ticket only, later tickets are unaffected.
 * *failures: the number of pictures skipped under BZNA_GPU_SKIP_BAD (may be
 * NULL). On success, either
 * - out != NULL: the batch (float32, count x 3 x out_height x out_width, in
 *   params' layout) is copied into `out` (device memory in the queue's
 *   context) on `stream` (a CUstream of that context, or NULL: the copy is
 *   waited for), after the work already queued there, and the ring buffer
 *   returns to the queue once the copy is done; or
 * - out == NULL: *ring_out points to the ring buffer holding the batch, in
 *   the queue's context, until bzna_gpu_release(queue, ticket, ...) (NULL
 *   for an empty batch).
 * Either way a ticket collected successfully is then released (which, after
 * a copy into `out`, only forgets its failures); a ticket whose collect
 * failed is finished and needs no release. */
int bzna_gpu_collect(bzna_gpu_queue* queue, int64_t ticket, void* stream, float* out,
                     float** ring_out, int64_t* failures);

/* Finishes a collected ticket: its ring buffer (if still held) returns to the
 * queue once the work queued on `stream` so far, the caller's reads of it, is
 * done (NULL: at once), and its failures are forgotten (after a copy into
 * `out`, `stream` is not used). "In flight" above counts the ring buffers not
 * yet returned, and the tickets whose decoding failed until they are
 * collected. */
int bzna_gpu_release(bzna_gpu_queue* queue, int64_t ticket, void* stream);

/* Failure `index` (0 .. *failures - 1) of a ticket submitted with
 * BZNA_GPU_SKIP_BAD, collected and not yet released: the sample's index in
 * the batch and the reason (NUL-terminated, truncated to len). */
int bzna_gpu_ticket_failure(bzna_gpu_queue* queue, int64_t ticket, int64_t index, int64_t* sample,
                            char* message, uint64_t len);

/* Device memory for callers without a CUDA runtime of their own (the kit):
 * allocated in `device`'s primary context; copies in either direction
 * (unified addressing). */
int bzna_gpu_alloc(int device, uint64_t bytes, void** ptr);
int bzna_gpu_free(int device, void* ptr);
int bzna_gpu_copy(int device, void* dst, const void* src, uint64_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* BZNA_TF_GPU_CORE_BZNA_GPU_H_ */
