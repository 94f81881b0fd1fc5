// CRC-32C (Castagnoli): the checksums of .bzna pictures (bzna_tf/format/checksums.py).
//
// Bit-reflected polynomial 0x82F63B78, initial value and final XOR 0xffffffff,
// so Crc32c("123456789") == 0xE3069283. On x86-64 CPUs with SSE4.2 it runs on
// the crc32 instruction (about 8 bytes per 3 cycles, chosen at run time);
// elsewhere on a slicing-by-8 table. No TensorFlow.

#ifndef BZNA_TF_LIB_CRC32C_H_
#define BZNA_TF_LIB_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace bzna_tf {

// The CRC-32C of `n` bytes at `data` following bytes whose CRC-32C is `crc`
// (0 to start): Crc32cExtend(Crc32cExtend(0, a), b) is the CRC of a then b.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// Whether Crc32cExtend uses the CPU's crc32 instruction (for benchmarks and tests).
bool Crc32cIsHardware();

}  // namespace bzna_tf

#endif  // BZNA_TF_LIB_CRC32C_H_
