// libFuzzer harness: a whole .bzna file from the fuzzer's bytes, walked the
// way the source op walks it (kernels/bzna_dataset_kernels.cc): the outer
// index (top-level boxes, the four tracks and their sample tables, targets,
// the checksum table), then for each sample both pictures (with checksum
// verification on, then off), its filename and its target.
//
// Rule: every call succeeds or returns a DataLossError naming the file; no
// memory error, no undefined behaviour, no allocation beyond a few times the
// input (libFuzzer's -malloc_limit_mb catches the rest), no hang.
//
// The reader checks every offset before it reads, so it never asks the
// ByteSource for bytes past the end; the ranges around the end of the file
// that CheckReads asks for test the ByteSource's own check (CheckReadRange,
// which the kernels' TfFile calls too).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "fuzz/box_mutator.h"
#include "fuzz/fuzz_common.h"
#include "lib/bzna_format.h"
#include "lib/crc32c.h"

namespace {

using bzna_tf::fuzz::CheckReaderError;
using bzna_tf::fuzz::Fail;

// Samples read per input: the first ones and the last (past that the work
// grows with the input, not the coverage).
constexpr int64_t kSamplesRead = 16;

// With $BZNA_FUZZ_DUMP set, what was read is printed to stdout, one line per
// call, for fuzz/differential.py to compare with the Python reader.
bool Dump() {
  static const bool dump = std::getenv("BZNA_FUZZ_DUMP") != nullptr;
  return dump;
}

void ReadSample(const bzna_tf::ByteSource& src, const bzna_tf::BznaIndex& index, int64_t i) {
  for (auto track : {bzna_tf::PictureTrack::kThumb, bzna_tf::PictureTrack::kInput}) {
    bzna_tf::Picture pic;
    const absl::Status s = bzna_tf::ReadPicture(src, index, i, track, &pic);
    CheckReaderError(s, src.name(), "ReadPicture");
    if (Dump()) {
      std::printf("picture %lld %s %d ", static_cast<long long>(i), track == bzna_tf::PictureTrack::kThumb ? "thumb" : "input",
                  bzna_tf::ChecksumVerification() ? 1 : 0);
      if (s.ok()) {
        std::printf("%d %d %zu %08x\n", pic.width, pic.height, pic.annexb.size(), bzna_tf::Crc32c(pic.annexb.data(), pic.annexb.size()));
      } else {
        std::printf("error\n");
      }
    }
    if (s.ok()) {
      if (pic.width <= 0 || pic.height <= 0) Fail("ReadPicture succeeded with a non-positive size");
      if (pic.annexb.size() < 5 || pic.annexb.compare(0, 4, std::string("\0\0\0\1", 4)) != 0) {
        Fail("ReadPicture succeeded without an Annex-B start code first");
      }
    }
  }
  std::string name;
  const absl::Status s = bzna_tf::ReadFilename(src, index, i, &name);
  CheckReaderError(s, src.name(), "ReadFilename");
  const int64_t target = index.target(i);
  if (Dump()) {
    std::printf("sample %lld %lld %s ", static_cast<long long>(i), static_cast<long long>(target),
                !s.ok() ? "error" : index.has_fname ? "name" : "none");
    for (unsigned char c : name) std::printf("%02x", c);
    std::printf("\n");
  }
  if (i >= static_cast<int64_t>(index.targets.size()) && target != -1) Fail("an unlabelled sample has a target");
}

// Reads of ranges around the end of the file: those inside it give its
// bytes, the others a DataLossError naming the file (a range let through would
// read past the fuzzer's buffer: AddressSanitizer reports it).
void CheckReads(const bzna_tf::ByteSource& src, const uint8_t* data, size_t size) {
  const uint32_t h = bzna_tf::Crc32c(data, size);  // a range that varies with the input
  const uint64_t near_end = size > 32 ? size - 32 : 0;
  const uint64_t ranges[][2] = {{0, size}, {size, 0}, {size, 1}, {0, size + 1}, {size > 0 ? size - 1 : 0, 2},
                                {size + 1, 0}, {near_end + (h & 63), (h >> 8) & 63}};
  for (const auto& r : ranges) {
    const uint64_t offset = r[0], n = r[1];
    std::string got;
    const absl::Status s = src.Read(offset, n, &got);
    CheckReaderError(s, src.name(), "ByteSource::Read");
    const bool inside = offset <= size && n <= size - offset;
    if (s.ok() != inside) {
      Fail(absl::StrCat("ByteSource::Read(", offset, ", ", n, ") of a ", size, "-byte file ",
                        s.ok() ? "succeeded" : "failed"));
    }
    if (s.ok() && (got.size() != n || (n && std::memcmp(got.data(), data + offset, n) != 0))) {
      Fail("ByteSource::Read gave other bytes than the file's");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  bzna_tf::fuzz::MemorySource src(data, size);
  CheckReads(src, data, size);
  bzna_tf::BznaIndex index;
  const absl::Status s = bzna_tf::ReadBznaIndex(src, &index);
  CheckReaderError(s, src.name(), "ReadBznaIndex");
  if (Dump()) {
    std::printf("input %zu %08x\nindex %s %lld\n", size, bzna_tf::Crc32c(data, size), s.ok() ? "ok" : "error",
                static_cast<long long>(s.ok() ? index.num_samples() : -1));
  }
  if (!s.ok()) return 0;
  const int64_t n = index.num_samples();
  if (index.file_size != size) Fail("the index does not record the file's size");
  if (index.has_thumb && index.thumb.count() != n) Fail("bzna_thumb and bzna_input counts differ");
  if (index.has_fname && index.fname.count() != n) Fail("bzna_fname and bzna_input counts differ");
  if (static_cast<int64_t>(index.targets.size()) > n) Fail("more targets than samples");
  for (const auto* column : {&index.checksums.input, &index.checksums.thumb}) {
    if (!column->empty() && static_cast<int64_t>(column->size()) != n) Fail("a checksum column of the wrong length");
  }
  for (int64_t k = 0; k < n; ++k) {
    if (index.input.offsets[k] > size || index.input.sizes[k] > size - index.input.offsets[k]) {
      Fail("a bzna_input sample ends past the file");
    }
  }
  for (bool verify : {true, false}) {
    bzna_tf::SetChecksumVerification(verify);
    for (int64_t i = 0; i < n && i < kSamplesRead; ++i) ReadSample(src, index, i);
    if (n > kSamplesRead) ReadSample(src, index, n - 1);
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  return bzna_tf::fuzz::MutateBoxes(data, size, max_size, seed, 0);
}
