// Reading .bzna files without TensorFlow: the outer index and one picture.
//
//   ftyp | mdat [per-image mp4 0 .. N-1][targets int64 LE][names + NUL] | moov
//
// The outer moov has four tracks found by hdlr name: bzna_input (each sample
// is one whole per-image mp4), bzna_target, bzna_fname and bzna_thumb (its
// samples point inside the per-image mp4s, at each thumbnail). A per-image mp4
// is ftyp | mdat | moov again, with nested bzna_input / bzna_thumb video
// tracks carrying tkhd sizes and an hvc1/hvcC sample entry.
//
// This is the C++ twin of bzna_tf/format (the Python reader is the
// reference): every length and offset is checked against its box, the per-image
// mp4 and the file before use, and every error names the file, the sample, the
// box and the byte offset. Nothing here includes TensorFlow; the kernels adapt
// ByteSource to TensorFlow's filesystem layer.

#ifndef BZNA_TF_LIB_BZNA_FORMAT_H_
#define BZNA_TF_LIB_BZNA_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace bzna_tf {

// Positioned reads of one file. Implementations must be safe to call from
// several threads at once.
class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual const std::string& name() const = 0;
  virtual uint64_t size() const = 0;
  // Exactly `n` bytes at `offset` into `*out` (resized to n), or an error.
  // Implementations check the range with CheckReadRange before reading.
  virtual absl::Status Read(uint64_t offset, size_t n, std::string* out) const = 0;
};

// OK when the `n` bytes at `offset` lie inside a file of `size` bytes, else
// the DataLossError of a read past its end: "<file>, byte offset <offset>:
// needs bytes [<offset>, <offset + n>) but the file has <size> bytes". What
// every ByteSource checks first: the kernels' TfFile and the fuzzers'
// MemorySource.
absl::Status CheckReadRange(const std::string& file, uint64_t size, uint64_t offset, size_t n);

// One track's samples: offsets (absolute in the .bzna) and sizes.
struct SampleTable {
  std::vector<uint64_t> offsets;
  std::vector<uint32_t> sizes;
  int64_t count() const { return static_cast<int64_t>(offsets.size()); }
};

// The per-picture checksums of a file (bzna_tf/format/checksums.py: a
// top-level uuid box after moov). Each column holds one CRC-32C per sample, or
// is empty when the table has none for that track (or the file has no table
// this reader knows: no box, or another version or algorithm).
//
// What a checksum covers in sample i's per-image mp4 M = [0, S):
//   bzna_input: all of M.
//   bzna_thumb: M without [h, t), t = where the thumbnail picture starts in M
//     (outer bzna_thumb offset - outer bzna_input offset), h = the first
//     payload byte of M's top-level box holding byte t (its mdat).
// That is every byte ReadPicture reads for that track.
struct BznaChecksums {
  std::vector<uint32_t> input;
  std::vector<uint32_t> thumb;
  uint64_t box_offset = 0;  // of the uuid box, when there is one this reader uses
  // The table's stored checksums of the outer index (the whole moov box, the
  // bzna_target samples, the bzna_fname samples), as written; not verified
  // here (`bzna-tf verify` does). They tell one conversion of a file from
  // another: the kernels compare them with those the Python reader saw.
  bool has_index = false;  // whether the file has a table this reader uses
  uint64_t index_at = 0;   // the file offset of the three (12 bytes, big-endian)
  uint32_t moov = 0;
  uint32_t targets = 0;
  uint32_t names = 0;
};

// What a reader needs of the outer moov.
struct BznaIndex {
  std::string name;
  uint64_t file_size = 0;
  SampleTable input;         // one per-image mp4 per sample
  SampleTable thumb;         // empty when has_thumb is false
  SampleTable fname;         // empty when has_fname is false
  bool has_thumb = false;
  bool has_fname = false;
  std::vector<int64_t> targets;  // the labelled prefix; later samples have none
  BznaChecksums checksums;

  int64_t num_samples() const { return input.count(); }
  int64_t target(int64_t i) const {
    return i < static_cast<int64_t>(targets.size()) ? targets[i] : -1;
  }
};

// Reads the top-level box headers, the moov, the target samples and the
// checksum table (a malformed table is a DataLossError naming the file and
// the box's offset; sizes are checked against the sample count before
// anything is allocated).
absl::Status ReadBznaIndex(const ByteSource& src, BznaIndex* index);

// The big-endian 32-bit value at `p` (how the format stores its fields).
uint32_t Be32(const uint8_t* p);

// Whether ReadPicture verifies checksums: on unless the environment variable
// BZNA_TF_VERIFY_CHECKSUMS is 0, false, no or off when first asked, and
// SetChecksumVerification changes it for the whole process (it returns the
// previous value). Python: bzna_tf.ops.verify_checksums().
bool ChecksumVerification();
bool SetChecksumVerification(bool on);

// Which picture of a sample to read.
enum class PictureTrack { kThumb, kInput };

struct Picture {
  std::string annexb;  // start code + VPS, SPS, PPS from hvcC, then every NAL
  int32_t width = 0;   // the track's tkhd size (integer part of 16.16)
  int32_t height = 0;
};

// Sample `i` (0-based within this file) as an Annex-B H.265 picture. Reads
// the per-image mp4's header and then, in one read, everything from the
// picture to the end of its moov; never the other picture's bytes when the
// thumbnail is separate. When the file has a checksum for that track and
// verification is on, the bytes read are checked against it once the picture
// has been parsed: a mismatch is a DataLossError "<file>, sample <i>:
// checksum mismatch (stored X, computed Y) ...", like any damage found.
absl::Status ReadPicture(const ByteSource& src, const BznaIndex& index, int64_t i,
                         PictureTrack track, Picture* out);

// The stored basename of sample `i` (one trailing NUL stripped), which must be
// UTF-8: a DataLossError "<file>, sample <i>, box mdat, byte offset <o>:
// filename is not valid UTF-8 (<why>)" otherwise, as the Python reader says.
absl::Status ReadFilename(const ByteSource& src, const BznaIndex& index, int64_t i,
                          std::string* out);

// The error every malformed-file problem becomes:
// "<file>, sample <i>, box <box>, byte offset <o>: <what>" (parts omitted when
// unknown: sample < 0, empty box, offset < 0), as absl::DataLossError.
absl::Status FormatError(const std::string& file, int64_t sample, const std::string& box,
                         int64_t offset, const std::string& what);

}  // namespace bzna_tf

#endif  // BZNA_TF_LIB_BZNA_FORMAT_H_
