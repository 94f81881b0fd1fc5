// libFuzzer harness: lib/crc32c.cc's two implementations agree on every
// input. This binary links crc32c.cc twice: as built for the ops (the SSE4.2
// crc32 instruction where the CPU has it) and compiled with
// BZNA_TF_CRC32C_NO_HARDWARE in namespace bzna_tf_table (the slicing-by-8
// table). Both are compared with CRC-32C computed bit by bit from its
// definition, over the whole input, from every alignment of the first bytes,
// and continued across a fuzzer-chosen split.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "lib/crc32c.h"

namespace bzna_tf_table {
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
bool Crc32cIsHardware();
}  // namespace bzna_tf_table

namespace {

uint32_t Bitwise(uint32_t crc, const uint8_t* p, size_t n) {
  uint32_t c = ~crc;
  for (size_t k = 0; k < n; ++k) {
    c ^= p[k];
    for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
  }
  return ~c;
}

void Agree(uint32_t crc, const uint8_t* p, size_t n, const char* what) {
  const uint32_t want = Bitwise(crc, p, n);
  const uint32_t fast = bzna_tf::Crc32cExtend(crc, p, n);
  const uint32_t table = bzna_tf_table::Crc32cExtend(crc, p, n);
  if (fast != want || table != want) {
    std::fprintf(stderr, "CRC-32C disagreement (%s, %zu bytes from 0x%08x): definition 0x%08x, %s 0x%08x, table 0x%08x\n",
                 what, n, crc, want, bzna_tf::Crc32cIsHardware() ? "crc32 instruction" : "default", fast, table);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (bzna_tf_table::Crc32cIsHardware()) {
    std::fprintf(stderr, "fuzz_crc32c: the table build uses the crc32 instruction; nothing would be compared\n");
    std::exit(2);
  }
  if (!bzna_tf::Crc32cIsHardware()) {
    std::fprintf(stderr, "fuzz_crc32c: this CPU has no SSE4.2: comparing the table path with the definition only\n");
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Agree(0, data, size, "whole input");
  // Every start alignment of the hardware path's byte-wise head.
  for (size_t skip = 1; skip < 8 && skip <= size; ++skip) Agree(0, data + skip, size - skip, "unaligned start");
  if (size >= 2) {
    // Continued across a split chosen by the first two bytes, from a nonzero CRC.
    const size_t split = ((size_t{data[0]} << 8) | data[1]) % (size + 1);
    const uint32_t head = bzna_tf::Crc32cExtend(0, data, split);
    Agree(head, data + split, size - split, "continued");
    if (bzna_tf::Crc32cExtend(head, data + split, size - split) != bzna_tf::Crc32cExtend(0, data, size)) {
      std::fprintf(stderr, "CRC-32C: Extend(Extend(0, a), b) != Extend(0, a + b) at split %zu of %zu\n", split, size);
      std::abort();
    }
  }
  return 0;
}
