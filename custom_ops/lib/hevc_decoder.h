// H.265 decoding on the CPU with FFmpeg's libavcodec, loaded at run time.
//
// bzna_tf links no FFmpeg: Python tells Load() where the libavcodec and
// libavutil that PyAV ships (or any FFmpeg 4.4 .. 8) are, and they are opened
// with dlopen. Only functions are called, except for the first fields of
// AVFrame (data[8], linesize[8], extended_data, width, height, nb_samples,
// format), whose layout has not changed from libavcodec 58 to 62.
//
// A .bzna picture is a stream of its own (one IDR picture), so each decode is
// packet, end of stream, then a decoder reset; decoder contexts are pooled and
// reused (opening one costs more than decoding a thumbnail).

#ifndef BZNA_TF_LIB_HEVC_DECODER_H_
#define BZNA_TF_LIB_HEVC_DECODER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "lib/warp.h"

namespace bzna_tf {

// Opens the two libraries (once per process; later calls with any paths
// return the first result).
absl::Status LoadFfmpeg(const std::string& avutil_path, const std::string& avcodec_path);

// Whether LoadFfmpeg succeeded, and "libavcodec X.Y.Z" for messages.
bool FfmpegLoaded();
std::string FfmpegVersion();

// A decoded 8-bit 4:2:0 picture. The planes belong to the frame and stay
// valid until the DecodedPicture is destroyed.
class DecodedPicture {
 public:
  DecodedPicture() = default;
  ~DecodedPicture();
  DecodedPicture(const DecodedPicture&) = delete;
  DecodedPicture& operator=(const DecodedPicture&) = delete;

  int width() const { return width_; }    // coded (frame) size
  int height() const { return height_; }
  const uint8_t* plane(int i) const { return planes_[i]; }  // Y, Cb, Cr
  int stride(int i) const { return strides_[i]; }

 private:
  friend absl::Status DecodeHevc(absl::string_view annexb, DecodedPicture* out);

  void* frame_ = nullptr;  // AVFrame*
  int width_ = 0, height_ = 0;
  const uint8_t* planes_[3] = {nullptr, nullptr, nullptr};
  int strides_[3] = {0, 0, 0};
};

// Decodes one Annex-B H.265 picture. Errors (undecodable data, not 8-bit
// 4:2:0, FFmpeg not loaded) are InvalidArgument / FailedPrecondition with
// FFmpeg's own message.
absl::Status DecodeHevc(absl::string_view annexb, DecodedPicture* out);

// The planes of the picture at the top-left of a decoded frame as the warp
// reads them: Y of width x height, Cb and Cr of half that, rounded up (4:2:0),
// each with the frame's stride. The warp bounds and clamps by these sizes, so
// the frame's padding beyond the picture (the benzina layout codes pictures in
// frames rounded up to 512) is never read. The caller checks that the picture
// fits the frame (1 <= width <= pic.width(), 1 <= height <= pic.height()).
inline void PicturePlanes(const DecodedPicture& pic, int width, int height, warp::Plane<uint8_t> planes[3]) {
  planes[0] = {pic.plane(0), width, height, pic.stride(0), 1};
  planes[1] = {pic.plane(1), (width + 1) / 2, (height + 1) / 2, pic.stride(1), 1};
  planes[2] = {pic.plane(2), (width + 1) / 2, (height + 1) / 2, pic.stride(2), 1};
}

// The whole decoded frame's planes (its coded size).
inline void DecodedPlanes(const DecodedPicture& pic, warp::Plane<uint8_t> planes[3]) {
  PicturePlanes(pic, pic.width(), pic.height(), planes);
}

}  // namespace bzna_tf

#endif  // BZNA_TF_LIB_HEVC_DECODER_H_
