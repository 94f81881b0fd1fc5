// libFuzzer harness: one per-image mp4 (the bytes after a 15-byte header of
// parameters) read by ReadPicture, the code the kernels use to turn a sample
// into an Annex-B H.265 picture: the top-level box walk, the nested moov and
// its video tracks, the sample table, the hvc1/hvcC sample entry (parameter
// sets), the NAL length prefixes, and the per-picture checksum.
//
// The parameters stand for what the outer index says about the sample:
//   byte 0     flags: 1 the file has a bzna_thumb track, 2 a bzna_input
//              checksum, 4 a bzna_thumb checksum, 8 verification off
//   bytes 1, 2 how many bytes precede and follow the mp4 in the file
//   bytes 3-6  where the outer bzna_thumb index puts the thumbnail picture,
//              from the mp4's start (big-endian; wraps below it too)
//   bytes 7-14 the stored CRC-32Cs of the two pictures (big-endian)
// fuzz/make_corpus.py writes seeds in this form from real files.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/box_mutator.h"
#include "fuzz/fuzz_common.h"
#include "lib/bzna_format.h"

namespace {
constexpr size_t kParamBytes = 15;  // before the mp4
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bzna_tf::fuzz::Params params(data, size);
  const uint8_t flags = params.Byte();
  const uint8_t lead = params.Byte();      // bytes before the mp4 in the file
  const uint8_t trail = params.Byte();     // bytes after it
  const uint32_t thumb_at = params.U32();
  const uint32_t crc_input = params.U32();
  const uint32_t crc_thumb = params.U32();
  const uint8_t* mp4 = params.rest();
  const size_t mp4_size = params.left();

  // The file: `lead` filler bytes, the mp4, `trail` filler bytes (a heap
  // copy of exactly that size, so that ASan sees its bounds).
  std::vector<uint8_t> file(lead + mp4_size + trail, 0xee);
  if (mp4_size) std::memcpy(file.data() + lead, mp4, mp4_size);
  bzna_tf::fuzz::MemorySource src(file.data(), file.size(), "sample.bzna");

  bzna_tf::BznaIndex index;
  index.name = src.name();
  index.file_size = file.size();
  index.input.offsets = {lead};
  index.input.sizes = {static_cast<uint32_t>(mp4_size)};
  if (flags & 1) {
    index.has_thumb = true;
    index.thumb.offsets = {lead + static_cast<uint64_t>(static_cast<int32_t>(thumb_at))};
    index.thumb.sizes = {1};
  }
  if (flags & 2) index.checksums.input = {crc_input};
  if (flags & 4 && index.has_thumb) index.checksums.thumb = {crc_thumb};
  bzna_tf::SetChecksumVerification(!(flags & 8));

  for (auto track : {bzna_tf::PictureTrack::kThumb, bzna_tf::PictureTrack::kInput}) {
    bzna_tf::Picture pic;
    const absl::Status s = bzna_tf::ReadPicture(src, index, 0, track, &pic);
    bzna_tf::fuzz::CheckReaderError(s, src.name(), "ReadPicture");
    if (s.ok() && (pic.width <= 0 || pic.height <= 0 || pic.annexb.size() < 5)) {
      bzna_tf::fuzz::Fail("ReadPicture succeeded with an empty picture");
    }
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return bzna_tf::fuzz::MutateBoxes(data, size, max_size, seed, kParamBytes);
}
