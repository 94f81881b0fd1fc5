// What the libFuzzer harnesses share: a ByteSource over the fuzzer's bytes
// and a reader of fuzzer-chosen parameters. No TensorFlow.

#ifndef BZNA_TF_FUZZ_FUZZ_COMMON_H_
#define BZNA_TF_FUZZ_FUZZ_COMMON_H_

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "lib/bzna_format.h"

namespace bzna_tf {
namespace fuzz {

// A file held in memory, read as kernels/bzna_dataset_kernels.cc's TfFile
// reads one: the range checked by the same CheckReadRange (lib/bzna_format.cc)
// first, then copied into `out` (resized to n).
class MemorySource : public ByteSource {
 public:
  MemorySource(const uint8_t* data, size_t size, std::string name = "fuzz.bzna")
      : data_(data), size_(size), name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  uint64_t size() const override { return size_; }
  absl::Status Read(uint64_t offset, size_t n, std::string* out) const override {
    absl::Status in_file = CheckReadRange(name_, size_, offset, n);
    if (!in_file.ok()) return in_file;
    out->resize(n);
    if (n) std::memcpy(out->data(), data_ + offset, n);
    return absl::OkStatus();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  std::string name_;
};

// Consumes parameters from the front of the fuzzer's input; past its end
// every value is 0, so short inputs are still valid.
class Params {
 public:
  Params(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint32_t U32() {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v = (v << 8) | Byte();
    return v;
  }
  float Float() {
    const uint32_t bits = U32();
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  // An integer in [lo, hi].
  int Int(int lo, int hi) { return lo + static_cast<int>(U32() % static_cast<uint32_t>(hi - lo + 1)); }
  const uint8_t* rest() const { return data_ + pos_; }
  size_t left() const { return pos_ < size_ ? size_ - pos_ : 0; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// A broken promise of the code under test: printed, then abort() so that
// libFuzzer records the input as a crash.
[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "bzna_tf fuzz invariant broken: %s\n", what.c_str());
  std::abort();
}

// With $BZNA_FUZZ_VERBOSE set, each call's outcome is printed (to see what
// a reproducer does: BZNA_FUZZ_VERBOSE=1 build/fuzz_x crash-...).
inline bool Verbose() {
  static const bool verbose = std::getenv("BZNA_FUZZ_VERBOSE") != nullptr;
  return verbose;
}

inline void Say(const char* call, const absl::Status& s) {
  if (Verbose()) std::fprintf(stderr, "%s: %s\n", call, s.ok() ? "ok" : std::string(s.message()).c_str());
}

// Every error of the reader is a DataLossError whose message starts with the
// file's name (FormatError), never another kind.
inline void CheckReaderError(const absl::Status& s, const std::string& file, const char* call) {
  Say(call, s);
  if (s.ok()) return;
  if (s.code() != absl::StatusCode::kDataLoss) {
    Fail(absl::StrCat(call, " returned ", s.ToString(), ", expected a DataLossError"));
  }
  if (s.message().substr(0, file.size()) != file) {
    Fail(absl::StrCat(call, "'s error does not start with the file name: ", s.message()));
  }
}

}  // namespace fuzz
}  // namespace bzna_tf

#endif  // BZNA_TF_FUZZ_FUZZ_COMMON_H_
