// libFuzzer harness: the CPU decode + warp path of BznaDecodeWarp
// (kernels/warp_kernels.cc) without TensorFlow: an Annex-B H.265 picture
// through lib/hevc_decoder's FFmpeg glue (DecodeHevc), the decoded frame's
// planes as the kernel hands them to the warp (DecodedPlanes), then
// WarpYuv420Pixel over a fuzzer-chosen matrix, output size, layout and
// antialias setting.
//
// The input is kParams bytes of parameters, then the picture. FFmpeg is a
// real one loaded at run time, as bzna_tf loads it: $BZNA_TF_LIBAVUTIL and
// $BZNA_TF_LIBAVCODEC name the libraries (.ci/fuzz points them at PyAV's
// copies). It is not instrumented: coverage and the sanitizers' checks are
// of our code, and a crash inside libavcodec is FFmpeg's (reported apart).

#include <dlfcn.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "fuzz/fuzz_common.h"
#include "fuzz/warp_params.h"
#include "lib/hevc_decoder.h"
#include "lib/warp.h"

namespace {

constexpr size_t kParams = 48;
constexpr int kMaxOutput = 24;
constexpr int64_t kBatch = 2;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* util = std::getenv("BZNA_TF_LIBAVUTIL");
  const char* codec = std::getenv("BZNA_TF_LIBAVCODEC");
  if (!util || !codec) {
    std::fprintf(stderr,
                 "fuzz_decode_warp needs FFmpeg: set BZNA_TF_LIBAVUTIL and BZNA_TF_LIBAVCODEC to a libavutil and "
                 "a libavcodec (FFmpeg 4.4 to 8; .ci/fuzz uses PyAV's)\n");
    std::exit(2);
  }
  const absl::Status s = bzna_tf::LoadFfmpeg(util, codec);
  if (!s.ok()) {
    std::fprintf(stderr, "fuzz_decode_warp: %s\n", std::string(s.message()).c_str());
    std::exit(2);
  }
  // FFmpeg's complaints about broken streams would flood the log: quiet
  // (AV_LOG_QUIET), through the libavutil already open.
  if (void* lib = dlopen(util, RTLD_NOW | RTLD_NOLOAD)) {
    if (auto set_level = reinterpret_cast<void (*)(int)>(dlsym(lib, "av_log_set_level"))) set_level(-8);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size <= kParams) return 0;
  bzna_tf::fuzz::Params p(data, kParams);
  // A heap copy of exactly the picture's size, as the tensor's string is.
  const std::string picture(reinterpret_cast<const char*>(data + kParams), size - kParams);
  bzna_tf::DecodedPicture pic;
  const absl::Status s = bzna_tf::DecodeHevc(picture, &pic);
  bzna_tf::fuzz::Say("DecodeHevc", s);
  if (!s.ok()) {
    if (s.code() != absl::StatusCode::kInvalidArgument) {
      bzna_tf::fuzz::Fail("DecodeHevc failed with " + s.ToString() + ", expected InvalidArgument");
    }
    return 0;
  }
  if (pic.width() <= 0 || pic.height() <= 0) bzna_tf::fuzz::Fail("DecodeHevc gave an empty frame");
  bzna_tf::warp::Plane<uint8_t> planes[3];
  bzna_tf::DecodedPlanes(pic, planes);
  if (planes[1].row_stride != planes[2].row_stride) {
    // The warp samples Cr through Cb's taps (lib/warp.h): equal strides are needed.
    bzna_tf::fuzz::Fail("the decoded Cb and Cr planes have different strides");
  }
  const uint8_t mode = p.Byte();
  const int out_w = p.Int(1, kMaxOutput), out_h = p.Int(1, kMaxOutput);
  const bzna_tf::warp::OutputLayout layout{out_h, out_w, (mode & 1) != 0};
  const bool antialias = (mode & 2) != 0;
  float m[9];
  bzna_tf::fuzz::MakeMatrix(p, pic.width(), pic.height(), out_w, out_h, m);
  const int64_t n = (mode >> 2) % kBatch;
  const int64_t image = int64_t{3} * out_w * out_h;
  std::vector<float> out = bzna_tf::fuzz::Unwritten(kBatch * image);
  const bzna_tf::warp::ColorTransform color = bzna_tf::fuzz::PlainColor();
  for (int64_t y = 0; y < out_h; ++y) {
    for (int64_t x = 0; x < out_w; ++x) {
      bzna_tf::warp::WarpYuv420Pixel(planes[0], planes[1], planes[2], m, color, layout, n, y, x, out.data(),
                                     antialias);
    }
  }
  bzna_tf::fuzz::CheckOutput(out, kBatch, n, image, 0.0f, 255.0f, true, "decode + WarpYuv420Pixel");
  return 0;
}
