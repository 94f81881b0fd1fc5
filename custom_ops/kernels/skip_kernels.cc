// Kernels of BznaReportSkips and BznaSkipCounts (ops/skip_ops.cc): a
// process-wide registry of named counters of skipped samples, with the last
// reasons and a rate-limited warning log.

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/env.h"
#include "tensorflow/core/platform/logging.h"

namespace bzna_tf {
namespace skip_kernels {  // this file's own (the ops build may compile files together)
namespace {

using ::tensorflow::OpKernel;
using ::tensorflow::OpKernelConstruction;
using ::tensorflow::OpKernelContext;
using ::tensorflow::Tensor;
using ::tensorflow::tstring;

constexpr int64_t kLoggedOneByOne = 10;   // skips logged individually per counter
constexpr int64_t kSummaryMicros = 30'000'000;  // then at most one line per 30 s
constexpr size_t kRecent = 100;           // reasons kept per counter

struct Counter {
  int64_t count = 0;
  int64_t unreported = 0;  // skips since the last line logged
  uint64_t last_log_micros = 0;
  std::deque<std::string> recent;
};

absl::Mutex registry_mu(absl::kConstInit);

std::map<std::string, Counter>& Registry() ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  static auto* counters = new std::map<std::string, Counter>();
  return *counters;
}

// Counts one skip and logs it (or a summary) as the rate limit allows.
void Report(Counter& c, const std::string& reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(registry_mu) {
  ++c.count;
  c.recent.push_back(reason);
  if (c.recent.size() > kRecent) c.recent.pop_front();
  const uint64_t now = tensorflow::Env::Default()->NowMicros();
  if (c.count <= kLoggedOneByOne) {
    LOG(WARNING) << "bzna_tf skipped an unreadable sample (" << c.count << " so far): " << reason
                 << (c.count == kLoggedOneByOne
                         ? " [later skips are summarised at most every 30 s; the dataset's bzna_skipped.count "
                           "has the total]"
                         : "");
    c.last_log_micros = now;
    return;
  }
  ++c.unreported;
  if (now - c.last_log_micros >= kSummaryMicros) {
    LOG(WARNING) << "bzna_tf skipped " << c.unreported << (c.unreported == 1 ? " more sample" : " more samples")
                 << " (" << c.count << " in all); the last: " << reason;
    c.unreported = 0;
    c.last_log_micros = now;
  }
}

class ReportSkipsOp : public OpKernel {
 public:
  explicit ReportSkipsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("counter", &counter_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& errors = ctx->input(0);
    OP_REQUIRES(ctx, errors.dims() == 1,
                absl::InvalidArgumentError(absl::StrCat("expected errors of shape [N]. Received shape ",
                                                        errors.shape().DebugString())));
    Tensor* ok = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, errors.shape(), &ok));
    const auto e = errors.flat<tstring>();
    auto keep = ok->flat<bool>();
    bool any = false;
    for (int64_t n = 0; n < e.size(); ++n) {
      keep(n) = e(n).empty();
      any |= !keep(n);
    }
    if (!any) return;
    absl::MutexLock lock(&registry_mu);
    Counter& c = Registry()[counter_];
    for (int64_t n = 0; n < e.size(); ++n) {
      if (!keep(n)) Report(c, std::string(e(n)));
    }
  }

 private:
  std::string counter_;
};

class SkipCountsOp : public OpKernel {
 public:
  explicit SkipCountsOp(OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("counter", &counter_));
  }

  void Compute(OpKernelContext* ctx) override {
    int64_t count = 0;
    std::deque<std::string> recent;
    {
      absl::MutexLock lock(&registry_mu);
      auto it = Registry().find(counter_);
      if (it != Registry().end()) {
        count = it->second.count;
        recent = it->second.recent;
      }
    }
    Tensor* total = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {}, &total));
    total->scalar<int64_t>()() = count;
    Tensor* reasons = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {static_cast<int64_t>(recent.size())}, &reasons));
    for (size_t i = 0; i < recent.size(); ++i) reasons->flat<tstring>()(i) = recent[i];
  }

 private:
  std::string counter_;
};

}  // namespace
}  // namespace skip_kernels
}  // namespace bzna_tf

// Counts one skipped sample under `counter` and logs it, as BznaReportSkips
// does: for BznaDecodeWarpDataset's kernels, the GPU library's included (it
// is handed this function when bzna_tf loads it: bzna_tf/ops/_load.py).
extern "C" void bzna_tf_report_skip(const char* counter, const char* reason) {
  namespace own = bzna_tf::skip_kernels;
  absl::MutexLock lock(&own::registry_mu);
  own::Report(own::Registry()[counter], reason);
}

namespace bzna_tf {
namespace skip_kernels {
namespace {

REGISTER_KERNEL_BUILDER(Name("BznaReportSkips").Device(tensorflow::DEVICE_CPU), ReportSkipsOp);
REGISTER_KERNEL_BUILDER(Name("BznaSkipCounts").Device(tensorflow::DEVICE_CPU), SkipCountsOp);

}  // namespace
}  // namespace skip_kernels
}  // namespace bzna_tf
