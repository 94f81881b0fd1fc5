// A structure-aware mutation for ISO BMFF inputs (fuzz_container,
// fuzz_sample): one box grows or shrinks by 1 to 8 bytes at the end of its
// payload, and the sizes of all its ancestors follow, so that the file stays
// a well-formed box tree. libFuzzer's byte-level mutations would need several
// coordinated edits for that, and without it the boundary cases of a parser
// (a box exactly one byte too short for its fields) are rarely reached.
// Used for half the mutations; libFuzzer's own (and the dictionary) for the
// rest.

#ifndef BZNA_TF_FUZZ_BOX_MUTATOR_H_
#define BZNA_TF_FUZZ_BOX_MUTATOR_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace bzna_tf {
namespace fuzz {

struct BoxSpan {
  size_t begin;   // of the header
  size_t end;     // one past the box
  size_t header;  // 8, or 16 with a 64-bit size
  int parent;     // index in the list, -1 at the top
};

inline uint64_t LoadBe(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int k = 0; k < n; ++k) v = (v << 8) | p[k];
  return v;
}

inline void StoreBe(uint8_t* p, int n, uint64_t v) {
  for (int k = n - 1; k >= 0; --k, v >>= 8) p[k] = static_cast<uint8_t>(v);
}

// Bytes of fields before the child boxes of a container type, or -1 when the
// type holds no boxes this walk knows.
inline int ChildrenAt(const uint8_t* type) {
  static const char* const kPlain[] = {"moov", "trak", "mdia", "minf", "stbl", "dinf", "edts", "udta"};
  for (const char* t : kPlain) {
    if (std::memcmp(type, t, 4) == 0) return 0;
  }
  if (std::memcmp(type, "stsd", 4) == 0 || std::memcmp(type, "dref", 4) == 0) return 8;
  if (std::memcmp(type, "hvc1", 4) == 0 || std::memcmp(type, "hev1", 4) == 0) return 78;
  return -1;
}

inline void WalkBoxes(const uint8_t* d, size_t begin, size_t end, int parent, int depth,
                      std::vector<BoxSpan>* out) {
  size_t pos = begin;
  while (end - pos >= 8 && out->size() < 4096) {
    uint64_t size = LoadBe(d + pos, 4);
    size_t header = 8;
    if (size == 1) {
      if (end - pos < 16) return;
      size = LoadBe(d + pos + 8, 8);
      header = 16;
    }
    if (size < header || size > end - pos) return;
    const int me = static_cast<int>(out->size());
    out->push_back({pos, pos + static_cast<size_t>(size), header, parent});
    const int skip = ChildrenAt(d + pos + 4);
    if (skip >= 0 && depth < 12 && size >= header + skip) {
      WalkBoxes(d, pos + header + skip, pos + size, me, depth + 1, out);
    }
    pos += size;
  }
}

// Grows or shrinks one box of the tree found from `start`; returns the new
// size, or 0 when the input has no box to change.
inline size_t MutateBoxTree(uint8_t* data, size_t size, size_t max_size, size_t start, unsigned seed) {
  if (start >= size) return 0;
  std::vector<BoxSpan> boxes;
  WalkBoxes(data, start, size, -1, 0, &boxes);
  if (boxes.empty()) return 0;
  std::minstd_rand rng(seed);
  const int index = static_cast<int>(rng() % boxes.size());
  const BoxSpan box = boxes[index];
  int delta = static_cast<int>(rng() % 8) + 1;
  if (rng() % 2) {
    // Shrink: drop the last `delta` payload bytes.
    if (box.end - box.begin < box.header + delta) return 0;
    std::memmove(data + box.end - delta, data + box.end, size - box.end);
    size -= delta;
    delta = -delta;
  } else {
    // Grow: insert `delta` bytes (zeros or copies of the payload's last byte).
    if (size + delta > max_size) return 0;
    std::memmove(data + box.end + delta, data + box.end, size - box.end);
    const uint8_t fill = rng() % 2 ? 0 : data[box.end - 1];
    std::memset(data + box.end, fill, delta);
    size += delta;
  }
  // The box and each ancestor: size field += delta (they all start before
  // the bytes that moved).
  for (int k = index; k >= 0; k = boxes[k].parent) {
    const BoxSpan& b = boxes[k];
    const int bytes = b.header == 16 ? 8 : 4;
    uint8_t* field = data + b.begin + (b.header == 16 ? 8 : 0);
    StoreBe(field, bytes, LoadBe(field, bytes) + static_cast<uint64_t>(static_cast<int64_t>(delta)));
  }
  return size;
}

// LLVMFuzzerCustomMutator's body for a box file starting at `start`.
inline size_t MutateBoxes(uint8_t* data, size_t size, size_t max_size, unsigned seed, size_t start) {
  if (seed % 2 == 0) {
    const size_t out = MutateBoxTree(data, size, max_size, start, seed / 2);
    if (out) return out;
  }
  return LLVMFuzzerMutate(data, size, max_size);
}

}  // namespace fuzz
}  // namespace bzna_tf

#endif  // BZNA_TF_FUZZ_BOX_MUTATOR_H_
