#include "lib/crc32c.h"

#include <cstring>

// BZNA_TF_CRC32C_NO_HARDWARE builds the table path only (the tests compare both).
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(BZNA_TF_CRC32C_NO_HARDWARE)
#include <nmmintrin.h>
#define BZNA_TF_CRC32C_X86 1
#endif

namespace bzna_tf {
namespace {

constexpr uint32_t kPoly = 0x82F63B78;  // Castagnoli, bit-reflected

// kTables[k][b]: the register after byte b followed by k zero bytes.
struct Tables {
  uint32_t t[8][256];
  Tables() {
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? kPoly : 0);
      t[0][b] = c;
    }
    for (int k = 1; k < 8; ++k) {
      for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xff];
    }
  }
};

const Tables& GetTables() {
  static const Tables* tables = new Tables();
  return *tables;
}

uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian hosts: the first byte is the low byte, as the table steps expect
}

uint32_t SoftwareRaw(uint32_t c, const uint8_t* p, size_t n) {
  const Tables& tb = GetTables();
  const auto& t = tb.t;
  const bool little = [] {
    const uint16_t one = 1;
    uint8_t b;
    std::memcpy(&b, &one, 1);
    return b == 1;
  }();
  if (little) {
    for (; n >= 8; n -= 8, p += 8) {
      const uint64_t v = Load64(p) ^ c;
      c = t[7][v & 0xff] ^ t[6][(v >> 8) & 0xff] ^ t[5][(v >> 16) & 0xff] ^ t[4][(v >> 24) & 0xff] ^
          t[3][(v >> 32) & 0xff] ^ t[2][(v >> 40) & 0xff] ^ t[1][(v >> 48) & 0xff] ^ t[0][v >> 56];
    }
  }
  for (; n; --n, ++p) c = t[0][(c ^ *p) & 0xff] ^ (c >> 8);
  return c;
}

#ifdef BZNA_TF_CRC32C_X86
__attribute__((target("sse4.2"))) uint32_t HardwareRaw(uint32_t c, const uint8_t* p, size_t n) {
  for (; n && (reinterpret_cast<uintptr_t>(p) & 7); --n, ++p) c = _mm_crc32_u8(c, *p);
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) c64 = _mm_crc32_u64(c64, Load64(p));
  c = static_cast<uint32_t>(c64);
  for (; n; --n, ++p) c = _mm_crc32_u8(c, *p);
  return c;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

bool Crc32cIsHardware() {
#ifdef BZNA_TF_CRC32C_X86
  return HasSse42();
#else
  return false;
#endif
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  const uint8_t* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
#ifdef BZNA_TF_CRC32C_X86
  if (HasSse42()) return ~HardwareRaw(c, p, n);
#endif
  return ~SoftwareRaw(c, p, n);
}

}  // namespace bzna_tf
