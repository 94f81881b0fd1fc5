// BznaDecodeWarpDataset's CPU kernel: FFmpeg decodes and the CPU warp writes
// each batch on a background thread (kernels/decode_warp_cpu.h, the code of
// BznaDecodeWarp's CPU kernel), while the caller uses earlier batches. The
// dataset and iterator are kernels/decode_dataset.h, shared with the GPU
// kernel: on the CPU its whole logic (order, depth, checkpoints with batches
// in flight, on_error, shutdown) runs and is tested without a GPU.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "kernels/decode_dataset.h"
#include "kernels/decode_warp_cpu.h"
#include "kernels/warp_common.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/threadpool.h"
#include "tsl/platform/cpu_info.h"

extern "C" void bzna_tf_report_skip(const char* counter, const char* reason);

namespace bzna_tf {
namespace decode_dataset {
namespace {

// Decodes submitted batches one after the other on its own thread, each
// spread over a pool of the machine's cores.
class CpuBackend : public DecodeBackend {
 public:
  CpuBackend(tensorflow::Env* env, const Spec& spec)
      : spec_(spec),
        pool_(std::make_unique<tensorflow::thread::ThreadPool>(env, "bzna_decode_warp",
                                                               std::max(1, tsl::port::MaxParallelism()))) {
    thread_.reset(env->StartThread(tensorflow::ThreadOptions(), "bzna_decode_warp_batches", [this] { Run(); }));
  }

  // Pictures not yet started fail as cancelled; the batch being decoded
  // ends at its next picture.
  ~CpuBackend() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    cancelled_ = true;
    thread_.reset();  // joins
  }

  absl::Status Submit(const Batch& batch, int64_t* ticket) override {
    auto job = std::make_shared<Job>();
    job->batch = batch;  // shares the tensors' buffers
    absl::MutexLock lock(&mu_);
    *ticket = next_ticket_++;
    jobs_[*ticket] = job;
    queue_.push_back(job);
    return absl::OkStatus();
  }

  absl::Status Collect(IteratorContext* ctx, int64_t ticket, const TensorShape& shape, Tensor* images,
                       std::vector<std::string>* errors) override {
    std::shared_ptr<Job> job;
    {
      absl::MutexLock lock(&mu_);
      auto it = jobs_.find(ticket);
      if (it == jobs_.end()) return absl::InternalError(absl::StrCat("no batch has ticket ", ticket));
      job = it->second;
      jobs_.erase(it);
      auto done = [&job]() { return job->done; };
      mu_.Await(absl::Condition(&done));
    }
    if (job->images.shape() != shape) {
      return absl::InternalError(absl::StrCat("decoded ", job->images.shape().DebugString(), " for ",
                                              shape.DebugString()));
    }
    const Batch& batch = job->batch;
    for (int64_t n = 0; n < batch.size(); ++n) {
      const absl::Status& s = job->status[n];
      if (s.ok()) continue;
      // What on_error = "skip" may skip (DecodeErrors::Skippable); the rest
      // fails the batch, named.
      if (!DecodeErrors::Skippable(s)) return absl::Status(s.code(), NamedError(batch, n, s.message()));
      (*errors)[n] = std::string(s.message());
    }
    *images = std::move(job->images);
    return absl::OkStatus();
  }

  absl::Status Output(IteratorContext*, const Tensor& host, Tensor* out) override {
    *out = host;
    return absl::OkStatus();
  }

  absl::Status Empty(IteratorContext*, const TensorShape& shape, Tensor* images) override {
    *images = Tensor(tensorflow::DT_FLOAT, shape);
    return absl::OkStatus();
  }

  absl::Status KeepImages(IteratorContext*, const std::vector<int64_t>& keep, const Tensor& images,
                          Tensor* out) override {
    *out = KeepRows(images, keep);
    return absl::OkStatus();
  }

 private:
  struct Job {
    Batch batch;
    Tensor images;
    std::vector<absl::Status> status;
    bool done = false;  // guarded by the backend's mu_
  };

  void Run() {
    for (;;) {
      std::shared_ptr<Job> job;
      {
        absl::MutexLock lock(&mu_);
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
        mu_.Await(absl::Condition(&ready));
        if (stop_) {
          for (auto& j : queue_) j->done = true;  // their images are never read: the iterator is going
          queue_.clear();
          return;
        }
        job = queue_.front();
        queue_.pop_front();
      }
      Decode(job.get());
      absl::MutexLock lock(&mu_);
      job->done = true;
    }
  }

  void Decode(Job* job) {
    const Batch& batch = job->batch;
    const int64_t n = batch.size();
    TensorShape shape = spec_.channels_first
                            ? TensorShape({n, 3, spec_.args.out_height, spec_.args.out_width})
                            : TensorShape({n, spec_.args.out_height, spec_.args.out_width, 3});
    job->images = Tensor(tensorflow::DT_FLOAT, shape);
    WarpArgs args = spec_.args;
    args.matrices = batch.components[kMatrices].flat<float>().data();
    args.broadcast_matrix = false;
    PictureSizes sizes;
    sizes.Set(batch.components[kPictureSizes].flat<int32_t>().data());
    warp::OutputLayout layout;
    layout.height = args.out_height;
    layout.width = args.out_width;
    layout.channels_first = spec_.channels_first;
    float* out = job->images.flat<float>().data();
    tensorflow::thread::ThreadPool* pool = pool_.get();
    DecodeWarpPictures(
        [pool](int64_t total, int64_t cost, const std::function<void(int64_t, int64_t)>& fn) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
          pool->ParallelFor(total, cost, fn);
#pragma GCC diagnostic pop
        },
        batch.components[kData], sizes, args, layout, out, &job->status, &cancelled_);
    for (int64_t i = 0; i < n; ++i) {
      if (!job->status[i].ok()) FillOob(args, layout, i, out);
    }
  }

  const Spec spec_;
  std::unique_ptr<tensorflow::thread::ThreadPool> pool_;
  std::atomic<bool> cancelled_{false};
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, std::shared_ptr<Job>> jobs_ ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Job>> queue_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<tensorflow::Thread> thread_;  // last: started once the rest is built
};

absl::Status MakeCpuBackend(IteratorContext* ctx, const Spec& spec, std::unique_ptr<DecodeBackend>* backend) {
  *backend = std::make_unique<CpuBackend>(ctx->env(), spec);
  return absl::OkStatus();
}

SkipReporter CpuReporter() { return &bzna_tf_report_skip; }

class CpuDatasetOp : public DatasetOp {
 public:
  explicit CpuDatasetOp(OpKernelConstruction* ctx) : DatasetOp(ctx, &MakeCpuBackend, &CpuReporter) {}
};

REGISTER_KERNEL_BUILDER(Name(kOpName).Device(tensorflow::DEVICE_CPU), CpuDatasetOp);

}  // namespace
}  // namespace decode_dataset
}  // namespace bzna_tf
