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

// The planes of a decoded picture as the warp reads them: Y of the coded
// size, Cb and Cr of half that, rounded up (4:2:0), each with its stride.
inline void DecodedPlanes(const DecodedPicture& pic, warp::Plane<uint8_t> planes[3]) {
  const int w = pic.width(), h = pic.height();
  planes[0] = {pic.plane(0), w, h, pic.stride(0), 1};
  planes[1] = {pic.plane(1), (w + 1) / 2, (h + 1) / 2, pic.stride(1), 1};
  planes[2] = {pic.plane(2), (w + 1) / 2, (h + 1) / 2, pic.stride(2), 1};
}
  void* frame_ = nullptr;  // AVFrame*
  int width_ = 0, height_ = 0;
  const uint8_t* planes_[3] = {nullptr, nullptr, nullptr};
  int strides_[3] = {0, 0, 0};
};

// Decodes one Annex-B H.265 picture. Errors (undecodable data, not 8-bit
// 4:2:0, FFmpeg not loaded) are InvalidArgument / FailedPrecondition with
// FFmpeg's own message.
absl::Status DecodeHevc(absl::string_view annexb, DecodedPicture* out);

// The planes of a decoded picture as the warp reads them: Y of the coded
// size, Cb and Cr of half that, rounded up (4:2:0), each with its stride.
inline void DecodedPlanes(const DecodedPicture& pic, warp::Plane<uint8_t> planes[3]) {
  const int w = pic.width(), h = pic.height();
  planes[0] = {pic.plane(0), w, h, pic.stride(0), 1};
  planes[1] = {pic.plane(1), (w + 1) / 2, (h + 1) / 2, pic.stride(1), 1};
  planes[2] = {pic.plane(2), (w + 1) / 2, (h + 1) / 2, pic.stride(2), 1};
}

}  // namespace bzna_tf

#endif  // BZNA_TF_LIB_HEVC_DECODER_H_
