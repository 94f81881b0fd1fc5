// bzna_gpu.h's asynchronous batches: a queue decodes and warps submitted
// batches on its own worker thread while the caller trains on earlier ones.
//
// Threads: the caller's (submit, collect, release; any number) and one worker
// per queue, which takes the pending tickets in order and runs each batch
// through the context's NvdecPool (its decoder sessions, threads and streams)
// into a ring buffer, exactly as bzna_gpu_decode_warp does (capi.cc's
// DecodeWarp), so the results are the same bits.
//
// Memory: `depth` ring buffers of device memory (allocated at the first batch
// that needs one, grown to the largest batch: never more than depth x the
// largest batch's output), one device buffer for the matrices (the worker
// runs one batch at a time), and the host copies of the batches submitted and
// not yet decoded (at most depth, since submit blocks beyond). A ticket holds
// a ring buffer from the moment the worker starts it until it is copied out
// (collect into `out`) or released; at most `depth` tickets are in flight, so
// a free buffer is always there for the next batch.
//
// Events: a ring buffer read on a caller's stream (collect's copy, or the
// caller's own reads before release(stream)) gets an event recorded there when
// it returns to the queue; the worker's stream waits for that event (on the
// GPU) before the next batch writes the buffer, and growing a buffer waits for
// it on the host first. Host waits are on blocking-sync events (driver.h), and
// the callers wait on a condition variable: no CPU spent spinning.

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "gpu/core/bzna_gpu.h"
#include "gpu/core/calls.h"
#include "gpu/core/driver.h"
#include "gpu/core/nvdec.h"
#include "gpu/core/status.h"

namespace bzna_tf {
namespace gpu {
namespace {

constexpr int32_t kMaxDepth = 64;

template <typename... Args>
Status Cancelled(const Args&... args) {
  return Status(BZNA_GPU_CANCELLED, Cat(args...));
}

// What a single-picture decode's error says, without the "sample 0 of the
// batch: " that DecodeBatch puts before it.
std::string Reason(const Status& s) {
  static const std::string prefix = "sample 0 of the batch: ";
  const std::string& m = s.message();
  return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
}

enum class State {
  kPending,    // submitted, waiting for the worker
  kRunning,    // being decoded
  kDone,       // decoded into its ring buffer, not collected yet
  kFailed,     // decoding failed; collect returns the error
  kCancelled,  // the queue was destroyed before it ran
  kCollected,  // collected without `out`: the caller reads its ring buffer until release
  kCopied,     // collected into `out`: its buffer is back; release only forgets its failures
};

// One batch: what submit copied (dropped once decoded), then its outcome.
struct Ticket {
  State state = State::kPending;
  std::vector<uint8_t> bytes;      // the pictures, one after another
  std::vector<uint64_t> offsets;   // count + 1: picture n is bytes[offsets[n], offsets[n + 1])
  std::vector<float> matrices;     // matrix_count x 9
  int64_t matrix_count = 0;
  std::vector<int32_t> picture_sizes;  // count x 2, or empty: the decoded frames' sizes
  bzna_gpu_warp_params params{};
  int32_t flags = 0;
  int64_t count = 0;
  int slot = -1;          // its ring buffer, from the start of its decode until copied out or released
  bool collecting = false;  // a collect of it is under way
  Status status;
  std::vector<std::pair<int64_t, std::string>> failures;  // SKIP_BAD: (sample, reason)
};

// A ring buffer.
struct Slot {
  CUdeviceptr ptr = 0;
  uint64_t bytes = 0;
  int64_t owner = -1;               // the ticket holding it; -1: free
  std::unique_ptr<Event> returned;  // recorded where its last holder's readers were; the next batch waits for it
};

class Queue {
 public:
  Queue(const Driver& d, CUcontext context, const Kernels& kernels, int32_t depth)
      : d_(d),
        gpu_{&d, context, kernels},
        depth_(depth),
        slots_(static_cast<size_t>(depth)),
        batch_done_(std::make_unique<Event>(d)) {
    for (Slot& s : slots_) s.returned = std::make_unique<Event>(d);
  }
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;
  ~Queue() { Shutdown(); }

  // The worker's stream and thread; the context is current.
  Status Start() {
    BZNA_GPU_RETURN_IF_ERROR(Check(d_, d_.cu->cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING),
                                   "creating the queue's stream (cuStreamCreate)"));
    try {
      worker_ = std::thread([this] { Work(); });
    } catch (const std::system_error& e) {
      return Internal("starting the queue's worker thread failed: ", e.what());
    }
    return Status();
  }

  Status Submit(std::unique_ptr<Ticket> t, int64_t* ticket) {
    std::unique_lock<std::mutex> lock(mu_);
    ++callers_;
    changed_.wait(lock, [&] { return stopping_ || in_flight_ < depth_; });
    Status s;
    if (stopping_) {
      s = Cancelled("the queue was destroyed while bzna_gpu_submit waited for a batch to be released");
    } else {
      const int64_t id = next_++;
      tickets_[id] = std::move(t);
      pending_.push_back(id);
      ++in_flight_;
      *ticket = id;
      work_.notify_one();
    }
    Leave();
    return s;
  }

  Status Collect(int64_t id, CUstream stream, float* out, float** ring_out, int64_t* failures) {
    std::unique_lock<std::mutex> lock(mu_);
    ++callers_;
    Status s = CollectLocked(lock, id, stream, out, ring_out, failures);
    Leave();
    return s;
  }

  Status Release(int64_t id, CUstream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Cancelled("the queue is being destroyed");
    auto it = tickets_.find(id);
    if (it == tickets_.end()) return NotInFlight(id);
    Ticket& t = *it->second;
    if (t.state != State::kCollected && t.state != State::kCopied) return NotCollected(id);
    if (t.state == State::kCollected && t.slot >= 0) {
      Slot& slot = slots_[static_cast<size_t>(t.slot)];
      if (stream != nullptr) {
        BZNA_GPU_RETURN_IF_ERROR(CheckStream(stream));
        ScopedContext current(d_, gpu_.context);
        BZNA_GPU_RETURN_IF_ERROR(current.status());
        BZNA_GPU_RETURN_IF_ERROR(slot.returned->Record(stream));
      }
      slot.owner = -1;
    }
    if (t.state == State::kCollected) --in_flight_;
    tickets_.erase(it);
    changed_.notify_all();
    return Status();
  }

  Status Failure(int64_t id, int64_t index, int64_t* sample, std::string* message) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Cancelled("the queue is being destroyed");
    auto it = tickets_.find(id);
    if (it == tickets_.end()) return NotInFlight(id);
    const Ticket& t = *it->second;
    if (t.state != State::kCollected && t.state != State::kCopied) return NotCollected(id);
    const int64_t n = static_cast<int64_t>(t.failures.size());
    if (index < 0 || index >= n) {
      return InvalidArgument("expected a failure index in [0, ", n, ") for ticket ", id, " (", n,
                             " pictures skipped). Received ", index);
    }
    *sample = t.failures[static_cast<size_t>(index)].first;
    *message = t.failures[static_cast<size_t>(index)].second;
    return Status();
  }

  // Cancels the pending tickets, wakes the blocked callers (CANCELLED), waits
  // for them and for the batch being decoded, and frees the ring.
  Status Shutdown() {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (shut_down_) return Status();
      stopping_ = true;
      for (int64_t id : pending_) tickets_[id]->state = State::kCancelled;
      pending_.clear();
      work_.notify_all();
      changed_.notify_all();
      changed_.wait(lock, [&] { return callers_ == 0; });
      shut_down_ = true;
    }
    if (worker_.joinable()) worker_.join();
    Status first;
    ScopedContext current(d_, gpu_.context);
    if (!current.status().ok()) return current.status();
    // A buffer's last readers (a copy on a caller's stream) finish before it is freed.
    for (Slot& s : slots_) {
      const Status synced = s.returned->Synchronize();
      if (first.ok()) first = synced;
      if (s.ptr != 0) d_.cu->cuMemFree(s.ptr);
      s.ptr = 0;
      s.returned.reset();
    }
    if (matrices_ != 0) d_.cu->cuMemFree(matrices_);
    matrices_ = 0;
    batch_done_.reset();
    if (stream_ != nullptr) d_.cu->cuStreamDestroy(stream_);
    stream_ = nullptr;
    tickets_.clear();
    return first;
  }

 private:
  void Leave() {
    if (--callers_ == 0 && stopping_) changed_.notify_all();
  }

  Status NotInFlight(int64_t id) const {
    if (id < 0 || id >= next_) {
      return InvalidArgument("ticket ", id, " was never submitted to this queue (its tickets so far: 0 to ",
                             next_ - 1, ")");
    }
    return InvalidArgument("ticket ", id,
                           " is finished: it was released, or collected with an error (a ticket is collected "
                           "once)");
  }

  static Status NotCollected(int64_t id) {
    return InvalidArgument("ticket ", id, " is not collected yet: bzna_gpu_collect it first");
  }

  // A caller's stream must be in the queue's context (copies and events there).
  Status CheckStream(CUstream stream) const {
    // CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) are the current context's: the queue's, pushed.
    if (reinterpret_cast<uintptr_t>(stream) <= 2) return Status();
    CUcontext context = nullptr;
    BZNA_GPU_RETURN_IF_ERROR(Check(d_, d_.stream_get_ctx(stream, &context), "cuStreamGetCtx"));
    if (context != gpu_.context) {
      return InvalidArgument("expected a stream of the queue's CUDA context (its device's primary context). "
                             "Received a stream of another context");
    }
    return Status();
  }

  Status CollectLocked(std::unique_lock<std::mutex>& lock, int64_t id, CUstream stream, float* out,
                       float** ring_out, int64_t* failures) {
    if (stopping_) return Cancelled("the queue is being destroyed");
    auto it = tickets_.find(id);
    if (it == tickets_.end()) return NotInFlight(id);
    Ticket& t = *it->second;
    if (t.collecting || t.state == State::kCollected || t.state == State::kCopied) {
      return InvalidArgument("ticket ", id, " is already collected (a ticket is collected once)");
    }
    if (out != nullptr && stream != nullptr) BZNA_GPU_RETURN_IF_ERROR(CheckStream(stream));
    t.collecting = true;
    changed_.wait(lock, [&] {
      return stopping_ || t.state == State::kDone || t.state == State::kFailed || t.state == State::kCancelled;
    });
    t.collecting = false;
    if (stopping_ || t.state == State::kCancelled) {
      return Cancelled("the queue was destroyed before ticket ", id, " was collected");
    }
    if (t.state == State::kFailed) {
      const Status s = t.status;
      tickets_.erase(it);
      --in_flight_;
      changed_.notify_all();
      return s;
    }
    if (failures != nullptr) *failures = static_cast<int64_t>(t.failures.size());
    Slot* slot = t.slot >= 0 ? &slots_[static_cast<size_t>(t.slot)] : nullptr;
    if (out == nullptr) {
      *ring_out = slot != nullptr ? reinterpret_cast<float*>(slot->ptr) : nullptr;
      t.state = State::kCollected;
      return Status();
    }
    // The copy runs without the lock (the worker goes on); the ticket is
    // ours meanwhile: `collecting` keeps other collects and releases off it.
    t.collecting = true;
    const uint64_t bytes = static_cast<uint64_t>(OutputElements(t.params, t.count)) * sizeof(float);
    lock.unlock();
    const Status copied = slot != nullptr ? CopyOut(*slot, bytes, stream, out) : Status();
    lock.lock();
    t.collecting = false;
    if (slot != nullptr) slot->owner = -1;
    t.slot = -1;
    --in_flight_;
    changed_.notify_all();
    if (!copied.ok()) {
      tickets_.erase(it);
      return copied;
    }
    t.state = State::kCopied;
    return Status();
  }

  // The ring buffer into `out`: on `stream`, with the buffer's event recorded
  // after the copy; or waited for (no stream).
  Status CopyOut(Slot& slot, uint64_t bytes, CUstream stream, float* out) {
    if (bytes == 0) return Status();
    ScopedContext current(d_, gpu_.context);
    BZNA_GPU_RETURN_IF_ERROR(current.status());
    const auto dst = reinterpret_cast<CUdeviceptr>(out);
    BZNA_GPU_RETURN_IF_ERROR(Check(d_, d_.cu->cuMemcpyDtoDAsync(dst, slot.ptr, bytes, stream),
                                   "copying the batch into `out` (cuMemcpyDtoDAsync)"));
    if (stream != nullptr) {
      const Status recorded = slot.returned->Record(stream);
      if (!recorded.ok()) d_.cu->cuStreamSynchronize(stream);  // the buffer returns only once read
      return recorded;
    }
    // The legacy default stream: a device-to-device copy does not block the host by itself.
    Event done(d_);
    BZNA_GPU_RETURN_IF_ERROR(done.Record(nullptr));
    return done.Synchronize();
  }

  void Work() {
    ScopedContext current(d_, gpu_.context);
    for (;;) {
      Ticket* t = nullptr;
      Slot* slot = nullptr;
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
        if (stopping_) return;
        const int64_t id = pending_.front();
        pending_.pop_front();
        t = tickets_.at(id).get();
        t->state = State::kRunning;
        if (t->count > 0) {
          for (size_t i = 0; i < slots_.size() && slot == nullptr; ++i) {
            if (slots_[i].owner < 0) {
              slot = &slots_[i];
              slot->owner = id;
              t->slot = static_cast<int>(i);
            }
          }
        }
      }
      Status s = current.status();
      if (s.ok() && t->count > 0) {
        s = slot == nullptr ? Internal("the queue has no free ring buffer for a batch in flight (a bug)")
                            : RunBatch(*t, *slot);
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<uint8_t>().swap(t->bytes);
        std::vector<uint64_t>().swap(t->offsets);
        std::vector<float>().swap(t->matrices);
        std::vector<int32_t>().swap(t->picture_sizes);
        if (s.ok()) {
          t->state = State::kDone;
        } else {
          t->state = State::kFailed;
          t->status = s;
          t->failures.clear();
          if (slot != nullptr) slot->owner = -1;
          t->slot = -1;
        }
        changed_.notify_all();
      }
    }
  }

  Status Grow(CUdeviceptr* ptr, uint64_t* have, uint64_t bytes, const char* what) {
    if (*have >= bytes) return Status();
    if (*ptr != 0) d_.cu->cuMemFree(*ptr);
    *ptr = 0;
    *have = 0;
    BZNA_GPU_RETURN_IF_ERROR(Check(d_, d_.cu->cuMemAlloc(ptr, bytes), what));
    *have = bytes;
    return Status();
  }

  // Decodes and warps t into the slot, as bzna_gpu_decode_warp would; with
  // SKIP_BAD, a batch with bad pictures again one picture at a time (as the
  // TensorFlow kernel does), the bad ones filled with oob and listed.
  Status RunBatch(Ticket& t, Slot& slot) {
    const bzna_gpu_warp_params& p = t.params;
    const uint64_t out_bytes = static_cast<uint64_t>(OutputElements(p, t.count)) * sizeof(float);
    if (slot.bytes < out_bytes) {
      BZNA_GPU_RETURN_IF_ERROR(slot.returned->Synchronize());  // its last readers, before cuMemFree
      BZNA_GPU_RETURN_IF_ERROR(
          Grow(&slot.ptr, &slot.bytes, out_bytes, "allocating a ring buffer of the queue (cuMemAlloc)"));
    } else {
      BZNA_GPU_RETURN_IF_ERROR(slot.returned->MakeWait(stream_));
    }
    const uint64_t m_bytes = t.matrices.size() * sizeof(float);
    BZNA_GPU_RETURN_IF_ERROR(
        Grow(&matrices_, &matrices_bytes_, m_bytes, "allocating the queue's matrices (cuMemAlloc)"));
    BZNA_GPU_RETURN_IF_ERROR(Check(d_, d_.cu->cuMemcpyHtoDAsync(matrices_, t.matrices.data(), m_bytes, stream_),
                                   "copying the matrices to the GPU (cuMemcpyHtoDAsync)"));
    std::vector<const uint8_t*> pictures(static_cast<size_t>(t.count));
    std::vector<uint64_t> sizes(static_cast<size_t>(t.count));
    for (size_t n = 0; n < pictures.size(); ++n) {
      pictures[n] = t.bytes.data() + t.offsets[n];
      sizes[n] = t.offsets[n + 1] - t.offsets[n];
    }
    const int32_t* hw = t.picture_sizes.empty() ? nullptr : t.picture_sizes.data();
    const auto* m = reinterpret_cast<const float*>(matrices_);
    auto* out = reinterpret_cast<float*>(slot.ptr);
    // The sessions' streams start after stream_'s work: the wait for the
    // buffer's readers and the matrices' upload.
    // A picture of 0 bytes (SKIP_BAD only: one that reading failed) is never given to NVDEC.
    const bool unread = std::find(sizes.begin(), sizes.end(), uint64_t{0}) != sizes.end();
    Status s = unread ? Status(BZNA_GPU_INVALID_ARGUMENT, "a picture was not read")
                      : DecodeWarp(gpu_, stream_, pictures.data(), sizes.data(), t.count, m, t.matrix_count, hw, p,
                                   out);
    if (s.ok() && t.count > 0) decoded_any_ = true;
    if (!s.ok() && (t.flags & BZNA_GPU_SKIP_BAD) != 0 && s.code() == BZNA_GPU_INVALID_ARGUMENT) {
      s = Status();
      const int64_t per_sample = OutputElements(p, 1);
      int64_t tried = 0, failed = 0;  // pictures given to NVDEC, and those it refused
      for (int64_t n = 0; n < t.count && s.ok(); ++n) {
        if (sizes[static_cast<size_t>(n)] == 0) {
          t.failures.emplace_back(n, "no picture: it was not read");
          s = FillOob(gpu_, stream_, 1, p, out + n * per_sample);
          continue;
        }
        ++tried;
        const float* mn = t.matrix_count == 1 ? m : m + 9 * n;
        const Status one = DecodeWarp(gpu_, stream_, &pictures[static_cast<size_t>(n)], &sizes[static_cast<size_t>(n)],
                                      1, mn, 1, hw == nullptr ? nullptr : hw + 2 * n, p, out + n * per_sample);
        if (one.ok()) {
          decoded_any_ = true;
          continue;
        }
        if (one.code() != BZNA_GPU_INVALID_ARGUMENT) {
          s = Status(one.code(), Cat("sample ", n, " of the batch: ", Reason(one)));
          break;
        }
        ++failed;
        failed_before_any_ += decoded_any_ ? 0 : 1;
        t.failures.emplace_back(n, Reason(one));
        s = FillOob(gpu_, stream_, 1, p, out + n * per_sample);
      }
      // NVDEC answers a broken driver or setup with the codes it gives bad data (CUDA_ERROR_UNKNOWN):
      // every picture of a batch failing, or the queue's first pictures failing before any decoded
      // (batches of one), is the decoder's failure, not the data's. Skipping would drop every sample
      // of every batch, with a warning each: an error instead.
      if (s.ok() && failed > 0 && ((tried >= 2 && failed == tried) || (!decoded_any_ && failed_before_any_ >= 2))) {
        const auto& first = *std::find_if(t.failures.begin(), t.failures.end(), [&](const auto& f) {
          return sizes[static_cast<size_t>(f.first)] != 0;
        });
        s = Internal(failed == tried && tried >= 2 ? Cat("every picture of a batch (", tried, ")")
                                                   : Cat("the first ", failed_before_any_, " pictures of the queue"),
                     " failed to decode on the GPU, the first with: ", first.second,
                     ". That is NVDEC's failure (its driver or setup), not the data's: nothing is skipped. Check "
                     "that `bzna-tf verify` passes the file, and decode on the CPU (device=\"cpu\") meanwhile");
        t.failures.clear();
      }
    }
    // stream_'s work (the upload) is done before the next batch overwrites the matrices.
    Status synced = batch_done_->Record(stream_);
    if (synced.ok()) synced = batch_done_->Synchronize();
    return s.ok() ? synced : s;
  }

  const Driver& d_;
  const Gpu gpu_;
  const int32_t depth_;
  CUstream stream_ = nullptr;  // the worker's: waits for returned buffers, uploads the matrices
  CUdeviceptr matrices_ = 0;
  uint64_t matrices_bytes_ = 0;
  // Whether any picture of the queue has decoded, and how many NVDEC refused before one did.
  bool decoded_any_ = false;
  int64_t failed_before_any_ = 0;

  std::mutex mu_;
  std::condition_variable work_;     // the worker: a pending ticket, or stopping
  std::condition_variable changed_;  // callers: a ticket finished or returned its buffer; shutdown: callers left
  std::map<int64_t, std::unique_ptr<Ticket>> tickets_;  // in flight, or collected and not released
  std::deque<int64_t> pending_;
  std::vector<Slot> slots_;
  std::unique_ptr<Event> batch_done_;  // the end of a batch's work on stream_
  int64_t next_ = 0;
  int32_t in_flight_ = 0;  // tickets holding (or about to hold) a ring buffer, and failed ones not collected
  int callers_ = 0;        // threads inside submit or collect
  bool stopping_ = false;
  bool shut_down_ = false;
  std::thread worker_;
};

}  // namespace
}  // namespace gpu
}  // namespace bzna_tf

struct bzna_gpu_queue : bzna_tf::gpu::Queue {
  using Queue::Queue;
};

using bzna_tf::gpu::Status;
namespace g = bzna_tf::gpu;

namespace {

g::Status NullQueue() {
  return g::InvalidArgument("expected a queue (from bzna_gpu_queue_create). Received a null pointer");
}

// Runs f, turning a C++ exception into a status (nothing may cross the C ABI).
template <typename F>
int Guarded(F f) {
  try {
    return g::Finish(f());
  } catch (const std::bad_alloc&) {
    return g::Finish(g::Status(BZNA_GPU_OUT_OF_MEMORY, "host memory ran out"));
  } catch (const std::exception& e) {
    return g::Finish(g::Internal("unexpected error: ", e.what()));
  }
}

g::Status Create(int device, int32_t depth, bzna_gpu_queue** queue) {
  auto d = g::GetDriver();
  if (!d.ok()) return d.status();
  auto context = g::ResolveContext(**d, device, nullptr);
  if (!context.ok()) return context.status();
  g::ScopedContext current(**d, *context);
  BZNA_GPU_RETURN_IF_ERROR(current.status());
  auto kernels = g::KernelsFor(**d, *context);
  if (!kernels.ok()) return kernels.status();
  // Without NVDEC no batch could run: say so now rather than at every ticket.
  auto pool = g::NvdecPool::ForContext(**d, *context);
  if (!pool.ok()) return pool.status();
  auto q = std::make_unique<bzna_gpu_queue>(**d, *context, *kernels, depth);
  BZNA_GPU_RETURN_IF_ERROR(q->Start());
  *queue = q.release();
  return Status();
}

}  // namespace

extern "C" {

int bzna_gpu_queue_create(int device, int32_t depth, bzna_gpu_queue** queue) {
  return Guarded([&]() -> Status {
    if (queue == nullptr) return g::InvalidArgument("expected a place for the queue. Received a null pointer");
    *queue = nullptr;
    if (depth < 1 || depth > g::kMaxDepth) {
      return g::InvalidArgument("expected a queue depth in [1, ", g::kMaxDepth, "]. Received ", depth);
    }
    return Create(device, depth, queue);
  });
}

int bzna_gpu_queue_destroy(bzna_gpu_queue* queue) {
  return Guarded([&]() -> Status {
    if (queue == nullptr) return Status();
    const Status s = queue->Shutdown();
    delete queue;
    return s;
  });
}

int bzna_gpu_submit(bzna_gpu_queue* queue, const uint8_t* const* pictures, const uint64_t* sizes, int64_t count,
                    const float* matrices, int64_t matrix_count, const int32_t* picture_sizes,
                    const bzna_gpu_warp_params* params, int32_t flags, int64_t* ticket) {
  return Guarded([&]() -> Status {
    // The batch's checks before the queue's, so that they answer without a GPU (a test passes no queue).
    BZNA_GPU_RETURN_IF_ERROR(g::CheckPictures(pictures, sizes, count, (flags & BZNA_GPU_SKIP_BAD) != 0));
    BZNA_GPU_RETURN_IF_ERROR(g::CheckPictureSizes(picture_sizes, count));
    BZNA_GPU_RETURN_IF_ERROR(g::CheckParams(params));
    BZNA_GPU_RETURN_IF_ERROR(g::CheckMatrices(matrices, matrix_count, count));
    if ((flags & ~BZNA_GPU_SKIP_BAD) != 0) {
      return g::InvalidArgument("expected flags 0 or BZNA_GPU_SKIP_BAD (1). Received ", flags);
    }
    if (ticket == nullptr) return g::InvalidArgument("expected a place for the ticket. Received a null pointer");
    if (queue == nullptr) return NullQueue();
    // Everything is copied now: the caller's buffers may be reused on return.
    auto t = std::make_unique<g::Ticket>();
    t->count = count;
    t->params = *params;
    t->flags = flags;
    t->offsets.resize(static_cast<size_t>(count) + 1);
    for (int64_t n = 0; n < count; ++n) t->offsets[n + 1] = t->offsets[n] + sizes[n];
    t->bytes.resize(t->offsets.back());
    for (int64_t n = 0; n < count; ++n) std::memcpy(t->bytes.data() + t->offsets[n], pictures[n], sizes[n]);
    if (count > 0) {
      t->matrix_count = matrix_count;
      t->matrices.assign(matrices, matrices + 9 * matrix_count);
      if (picture_sizes != nullptr) t->picture_sizes.assign(picture_sizes, picture_sizes + 2 * count);
    }
    return queue->Submit(std::move(t), ticket);
  });
}

int bzna_gpu_collect(bzna_gpu_queue* queue, int64_t ticket, void* stream, float* out, float** ring_out,
                     int64_t* failures) {
  return Guarded([&]() -> Status {
    if (out == nullptr && ring_out == nullptr) {
      return g::InvalidArgument("expected `out` (device memory to copy the batch into) or `ring_out` (for the ring "
                                "buffer's address). Received neither");
    }
    if (queue == nullptr) return NullQueue();
    if (failures != nullptr) *failures = 0;
    if (out != nullptr && ring_out != nullptr) *ring_out = nullptr;
    return queue->Collect(ticket, static_cast<CUstream>(stream), out, out == nullptr ? ring_out : nullptr,
                          failures);
  });
}

int bzna_gpu_release(bzna_gpu_queue* queue, int64_t ticket, void* stream) {
  return Guarded([&]() -> Status {
    if (queue == nullptr) return NullQueue();
    return queue->Release(ticket, static_cast<CUstream>(stream));
  });
}

int bzna_gpu_ticket_failure(bzna_gpu_queue* queue, int64_t ticket, int64_t index, int64_t* sample, char* message,
                            uint64_t len) {
  return Guarded([&]() -> Status {
    if (sample == nullptr) return g::InvalidArgument("expected a place for the sample index. Received a null pointer");
    if (message == nullptr || len == 0) {
      return g::InvalidArgument("expected a message buffer (len >= 1). Received ",
                                message == nullptr ? "a null pointer" : "len 0");
    }
    if (queue == nullptr) return NullQueue();
    std::string reason;
    BZNA_GPU_RETURN_IF_ERROR(queue->Failure(ticket, index, sample, &reason));
    const size_t n = std::min<size_t>(reason.size(), len - 1);
    std::memcpy(message, reason.data(), n);
    message[n] = '\0';
    return Status();
  });
}

}  // extern "C"
