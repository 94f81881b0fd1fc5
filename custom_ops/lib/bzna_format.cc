#include "lib/bzna_format.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "lib/crc32c.h"

namespace bzna_tf {

uint32_t Be32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

namespace {

constexpr char kInput[] = "bzna_input";
constexpr char kTarget[] = "bzna_target";
constexpr char kFname[] = "bzna_fname";
constexpr char kThumb[] = "bzna_thumb";

// The outer moov of ImageNet (1.43 M samples, co64) is about 45 MB; a moov
// larger than this is not a .bzna index and is refused before allocating.
constexpr uint64_t kMaxMoovBytes = uint64_t{2} << 30;
// hvc1 is a VisualSampleEntry: 78 bytes of fields before its child boxes.
constexpr size_t kVisualSampleEntryBytes = 78;
constexpr char kStartCode[4] = {0, 0, 0, 1};
// The checksum box (bzna_tf/format/checksums.py): a top-level uuid box with
// this usertype, uuid5(NAMESPACE_URL, "https://bzna_tf/checksums/1").
constexpr uint8_t kChecksumsUuid[16] = {0x9a, 0xad, 0x41, 0xed, 0xa1, 0x4f, 0x56, 0x55,
                                        0xa1, 0x35, 0xf3, 0x08, 0x55, 0xb0, 0x89, 0x81};
constexpr uint8_t kChecksumsVersion = 1;
constexpr char kChecksumsAlgorithm[4] = {'c', '3', '2', 'c'};  // CRC-32C
// version/flags, algorithm, sample_count, three index checksums, track_count.
constexpr uint64_t kChecksumsFixed = 4 + 4 + 4 + 12 + 1;

uint16_t Be16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
uint64_t Be64(const uint8_t* p) { return (uint64_t{Be32(p)} << 32) | Be32(p + 4); }

// Where a buffer being parsed lies: its file, sample, and the absolute file
// offset of its first byte.
struct Where {
  const std::string* file;
  int64_t sample;
  uint64_t base;
};

// A box inside a buffer: [begin, end) with its payload from `body`.
struct Box {
  std::string type;
  std::string path;  // e.g. moov/trak[bzna_input]/mdia/minf/stbl/stsz
  size_t begin = 0;
  size_t body = 0;
  size_t end = 0;
};

absl::Status Err(const Where& w, const std::string& box, uint64_t pos, const std::string& what) {
  return FormatError(*w.file, w.sample, box, static_cast<int64_t>(w.base + pos), what);
}

// Decodes one box header from `avail` bytes at p, `left` bytes from p to the
// end of the parent (size 0 means "to the end of the parent").
absl::Status ParseHeader(const uint8_t* p, uint64_t avail, uint64_t left, std::string* type,
                         uint64_t* header, uint64_t* size, std::string* why) {
  if (left < 8 || avail < 8) {
    *why = absl::StrCat("truncated box header: ", left, " bytes left, need 8");
    return absl::DataLossError("");
  }
  // Raw bytes: FormatError escapes whatever is not printable when it quotes one.
  type->assign(reinterpret_cast<const char*>(p + 4), 4);
  uint64_t s = Be32(p);
  *header = 8;
  if (s == 1) {
    if (left < 16 || avail < 16) {
      *why = absl::StrCat("truncated 64-bit box size of '", *type, "': ", left, " bytes left, need 16");
      return absl::DataLossError("");
    }
    s = Be64(p + 8);
    *header = 16;
  } else if (s == 0) {
    s = left;
  }
  if (s < *header) {
    *why = absl::StrCat("box '", *type, "' has size ", s, ", smaller than its ", *header, "-byte header");
    return absl::DataLossError("");
  }
  if (s > left) {
    *why = absl::StrCat("box '", *type, "' of ", s, " bytes runs past the end of its parent (", left,
                        " bytes left)");
    return absl::DataLossError("");
  }
  *size = s;
  return absl::OkStatus();
}

// The children of `parent` that start at or after `from`, in order.
absl::Status Children(const uint8_t* buf, const Box& parent, size_t from, const Where& w,
                      std::vector<Box>* out) {
  out->clear();
  size_t pos = from;
  while (pos < parent.end) {
    Box b;
    uint64_t header, size;
    std::string why;
    if (!ParseHeader(buf + pos, parent.end - pos, parent.end - pos, &b.type, &header, &size, &why).ok()) {
      return Err(w, parent.path, pos, why);
    }
    b.path = absl::StrCat(parent.path, "/", b.type);
    b.begin = pos;
    b.body = pos + header;
    b.end = pos + size;
    out->push_back(std::move(b));
    pos += size;
  }
  return absl::OkStatus();
}

// The first child of `parent` of a type; *found says whether there is one.
absl::Status FindChild(const uint8_t* buf, const Box& parent, const std::string& type, const Where& w, Box* out,
                       bool* found, std::string* seen = nullptr) {
  std::vector<Box> kids;
  absl::Status s = Children(buf, parent, parent.body, w, &kids);
  if (!s.ok()) return s;
  *found = false;
  for (Box& b : kids) {
    if (b.type == type) {
      *out = std::move(b);
      *found = true;
      return absl::OkStatus();
    }
    if (seen) absl::StrAppend(seen, seen->empty() ? "" : ", ", b.type);
  }
  return absl::OkStatus();
}

// The first child of `parent` of a type, which must exist.
absl::Status Child(const uint8_t* buf, const Box& parent, const std::string& type, const Where& w, Box* out) {
  bool found;
  std::string seen;
  absl::Status s = FindChild(buf, parent, type, w, out, &found, &seen);
  if (!s.ok() || found) return s;
  return Err(w, parent.path, parent.begin, absl::StrCat("no '", type, "' box in '", parent.type,
                                                         "' (found: ", seen.empty() ? "nothing" : seen, ")"));
}

// Bounds-checked big-endian fields of one box's payload.
class Fields {
 public:
  Fields(const uint8_t* buf, const Box& box, const Where& w) : buf_(buf), box_(box), w_(w), pos_(box.body) {}

  absl::Status Need(uint64_t n, const char* field) const {
    if (n > left()) {
      return Err(w_, box_.path, pos_, absl::StrCat("truncated '", box_.type, "': ", field, " needs ", n,
                                                   " bytes, ", left(), " left"));
    }
    return absl::OkStatus();
  }
  template <typename T>
  absl::Status Get(T* v, const char* field) {
    absl::Status s = Need(sizeof(T), field);
    if (!s.ok()) return s;
    const uint8_t* p = buf_ + pos_;
    if (sizeof(T) == 1) *v = static_cast<T>(p[0]);
    if (sizeof(T) == 2) *v = static_cast<T>(Be16(p));
    if (sizeof(T) == 4) *v = static_cast<T>(Be32(p));
    if (sizeof(T) == 8) *v = static_cast<T>(Be64(p));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }
  absl::Status Skip(uint64_t n, const char* field) {
    absl::Status s = Need(n, field);
    if (s.ok()) pos_ += n;
    return s;
  }
  const uint8_t* here() const { return buf_ + pos_; }
  size_t pos() const { return pos_; }
  uint64_t left() const { return box_.end - pos_; }
  absl::Status Error(const std::string& what) const { return Err(w_, box_.path, pos_, what); }

 private:
  const uint8_t* buf_;
  const Box& box_;
  const Where& w_;
  size_t pos_;
};

#define BZNA_RETURN_IF_ERROR(expr)     \
  do {                                 \
    absl::Status _status = (expr);     \
    if (!_status.ok()) return _status; \
  } while (0)

// What one trak yields.
struct Trak {
  Box box;
  std::string name;
  int32_t width = 0;
  int32_t height = 0;
  Box stbl;
  SampleTable table;  // offsets in the coordinates of `limit` (see ParseTrak)
};

absl::Status ParseHdlrName(const uint8_t* buf, const Box& hdlr, const Where& w, std::string* name) {
  Fields f(buf, hdlr, w);
  BZNA_RETURN_IF_ERROR(f.Skip(4 + 4 + 4 + 12, "version/flags, pre_defined, handler_type, reserved"));
  name->assign(reinterpret_cast<const char*>(f.here()), f.left());
  if (!name->empty() && name->back() == '\0') name->pop_back();
  return absl::OkStatus();
}

absl::Status ParseTkhdSize(const uint8_t* buf, const Box& tkhd, const Where& w, int32_t* width,
                           int32_t* height) {
  Fields f(buf, tkhd, w);
  uint8_t version;
  BZNA_RETURN_IF_ERROR(f.Get(&version, "version"));
  if (version > 1) return f.Error(absl::StrCat("tkhd version ", version, ", expected 0 or 1"));
  BZNA_RETURN_IF_ERROR(f.Skip(3 + (version == 1 ? 32 : 20) + 52, "times, ids, duration, matrix"));
  uint32_t w16, h16;
  BZNA_RETURN_IF_ERROR(f.Get(&w16, "width"));
  BZNA_RETURN_IF_ERROR(f.Get(&h16, "height"));
  *width = static_cast<int32_t>(w16 >> 16);
  *height = static_cast<int32_t>(h16 >> 16);
  return absl::OkStatus();
}

// stsz + stco/co64 + stsc -> per-sample offsets and sizes. Counts are checked
// against the bytes their boxes hold (or, for a constant sample size, against
// `limit`) before anything is allocated, and every sample must end by `limit`.
absl::Status ParseSampleTable(const uint8_t* buf, const Box& stbl, const std::string& track, const Where& w,
                              uint64_t limit, SampleTable* t) {
  Box stsz, stco, stsc;
  bool found_stco, co64 = false, has_stsc;
  BZNA_RETURN_IF_ERROR(Child(buf, stbl, "stsz", w, &stsz));
  BZNA_RETURN_IF_ERROR(FindChild(buf, stbl, "stsc", w, &stsc, &has_stsc));
  BZNA_RETURN_IF_ERROR(FindChild(buf, stbl, "stco", w, &stco, &found_stco));
  if (!found_stco) {
    BZNA_RETURN_IF_ERROR(FindChild(buf, stbl, "co64", w, &stco, &co64));
    if (!co64) return Err(w, stbl.path, stbl.begin, "no 'stco' or 'co64' box in 'stbl'");
  }

  Fields fz(buf, stsz, w);
  uint32_t constant, count;
  BZNA_RETURN_IF_ERROR(fz.Skip(4, "version/flags"));
  BZNA_RETURN_IF_ERROR(fz.Get(&constant, "sample_size"));
  BZNA_RETURN_IF_ERROR(fz.Get(&count, "sample_count"));
  if (constant == 0) {
    if (uint64_t{count} * 4 > fz.left()) {
      return fz.Error(absl::StrCat("sample_count says ", count, " entries but the box holds ", fz.left() / 4));
    }
  } else if (uint64_t{count} * constant > limit) {
    return fz.Error(absl::StrCat(count, " samples of ", constant, " bytes cannot fit in ", limit, " bytes"));
  }
  Fields fo(buf, stco, w);
  uint32_t chunks;
  BZNA_RETURN_IF_ERROR(fo.Skip(4, "version/flags"));
  BZNA_RETURN_IF_ERROR(fo.Get(&chunks, "entry_count"));
  BZNA_RETURN_IF_ERROR(fo.Need(uint64_t{chunks} * (co64 ? 8 : 4), "the chunk offset table"));
  // No stsc, or one sample in every chunk: offsets are the chunk offsets.
  uint32_t runs = 0;
  const uint8_t* table = nullptr;
  size_t table_pos = 0;
  if (has_stsc) {
    Fields fc(buf, stsc, w);
    BZNA_RETURN_IF_ERROR(fc.Skip(4, "version/flags"));
    BZNA_RETURN_IF_ERROR(fc.Get(&runs, "entry_count"));
    BZNA_RETURN_IF_ERROR(fc.Need(uint64_t{runs} * 12, "the sample-to-chunk table"));
    table = fc.here();
    table_pos = fc.pos();
  }
  bool one_per_chunk = true;
  for (uint32_t r = 0; r < runs; ++r) one_per_chunk = one_per_chunk && Be32(table + 12 * r + 4) == 1;
  if (one_per_chunk && chunks != count) {
    return Err(w, stco.path, stco.begin,
               absl::StrCat(chunks, " chunk offsets for ", count, " samples (stsz), with one sample per chunk"));
  }
  if (!one_per_chunk) {
    // The chunks must hold exactly the samples stsz sizes: with more, which
    // ones are meant is a guess (the Python reader refuses it too). At most
    // (2^32 - 1)^2 in all, so no overflow; malformed runs are named below.
    uint64_t held = 0;
    for (uint32_t r = 0; r < runs; ++r) {
      const uint64_t first = Be32(table + 12 * r), per_chunk = Be32(table + 12 * r + 4);
      const uint64_t next = std::min<uint64_t>(r + 1 < runs ? Be32(table + 12 * (r + 1)) : uint64_t{chunks} + 1,
                                               uint64_t{chunks} + 1);
      if (first >= 1 && next > first) held += (next - first) * per_chunk;
    }
    if (held > count) {
      return Err(w, stsc.path, stsc.begin,
                 absl::StrCat("chunks hold ", held, held == 1 ? " sample" : " samples", " but stsz has ", count));
    }
  }
  t->offsets.assign(count, 0);
  t->sizes.assign(count, constant);
  const uint8_t* sizes = fz.here();
  if (constant == 0) {
    for (uint32_t s = 0; s < count; ++s) t->sizes[s] = Be32(sizes + 4 * s);
  }
  const uint8_t* offs = fo.here();
  uint64_t s = 0;
  if (one_per_chunk) {
    for (; s < count; ++s) t->offsets[s] = co64 ? Be64(offs + 8 * s) : Be32(offs + 4 * s);
  }
  for (uint32_t r = 0; r < runs && s < count; ++r) {
    uint32_t first = Be32(table + 12 * r), per_chunk = Be32(table + 12 * r + 4);
    uint64_t next = r + 1 < runs ? Be32(table + 12 * (r + 1)) : uint64_t{chunks} + 1;
    if (first == 0 || first > chunks || next <= first || (r == 0 && first != 1)) {
      return Err(w, stsc.path, table_pos + 12 * r,
                 absl::StrCat("stsc entry ", r, " starts at chunk ", first, " (", chunks,
                              " chunks; entries must start at 1 and increase)"));
    }
    for (uint64_t c = first; c < next && c <= chunks && s < count; ++c) {
      uint64_t off = co64 ? Be64(offs + 8 * (c - 1)) : Be32(offs + 4 * (c - 1));
      for (uint32_t k = 0; k < per_chunk && s < count; ++k, ++s) {
        t->offsets[s] = off;
        off += t->sizes[s];
      }
    }
  }
  if (s != count) {
    return Err(w, stsc.path, stsc.begin,
               absl::StrCat("stsc and stco place ", s, " of the ", count, " samples of track '", track, "'"));
  }
  for (uint32_t k = 0; k < count; ++k) {
    if (t->offsets[k] > limit || t->sizes[k] > limit - t->offsets[k]) {
      return FormatError(*w.file, w.sample < 0 ? k : w.sample, stco.path, static_cast<int64_t>(w.base + stco.begin),
                         absl::StrCat("track '", track, "' sample ", k, " at offset ", t->offsets[k], " of ",
                                      t->sizes[k], " bytes ends past the ", limit, " bytes available"));
    }
  }
  return absl::OkStatus();
}

// One trak: name (from hdlr), tkhd size, and optionally its sample table.
absl::Status ParseTrak(const uint8_t* buf, Box trak, const Where& w, uint64_t limit, bool with_table,
                       Trak* out) {
  Box mdia, hdlr, tkhd, minf;
  BZNA_RETURN_IF_ERROR(Child(buf, trak, "mdia", w, &mdia));
  BZNA_RETURN_IF_ERROR(Child(buf, mdia, "hdlr", w, &hdlr));
  BZNA_RETURN_IF_ERROR(ParseHdlrName(buf, hdlr, w, &out->name));
  // Name the track in every later path, as the Python reader does.
  std::string prefix = trak.path;
  trak.path = absl::StrCat(trak.path, "[", out->name, "]");
  auto rename = [&](Box* b) { b->path = trak.path + b->path.substr(prefix.size()); };
  BZNA_RETURN_IF_ERROR(Child(buf, trak, "tkhd", w, &tkhd));
  BZNA_RETURN_IF_ERROR(ParseTkhdSize(buf, tkhd, w, &out->width, &out->height));
  rename(&mdia);
  BZNA_RETURN_IF_ERROR(Child(buf, mdia, "minf", w, &minf));
  BZNA_RETURN_IF_ERROR(Child(buf, minf, "stbl", w, &out->stbl));
  out->box = trak;
  if (with_table) {
    BZNA_RETURN_IF_ERROR(ParseSampleTable(buf, out->stbl, out->name, w, limit, &out->table));
  }
  return absl::OkStatus();
}

// The traks of a moov, by name (the first of each name wins for per-image
// mp4s; the outer index refuses duplicates).
absl::Status Traks(const uint8_t* buf, const Box& moov, const Where& w, std::vector<Box>* traks) {
  std::vector<Box> kids;
  BZNA_RETURN_IF_ERROR(Children(buf, moov, moov.body, w, &kids));
  traks->clear();
  for (Box& b : kids) {
    if (b.type == "trak") traks->push_back(std::move(b));
  }
  return absl::OkStatus();
}

// Parameter sets (VPS, SPS, PPS, in that order) and the NAL length size.
absl::Status ParseHvcc(const uint8_t* buf, const Box& hvcc, const Where& w,
                       std::vector<std::pair<const uint8_t*, size_t>>* sets, int* length_size) {
  Fields f(buf, hvcc, w);
  BZNA_RETURN_IF_ERROR(f.Skip(21, "configuration fields"));
  uint8_t lsm1, arrays;
  BZNA_RETURN_IF_ERROR(f.Get(&lsm1, "lengthSizeMinusOne"));
  BZNA_RETURN_IF_ERROR(f.Get(&arrays, "numOfArrays"));
  *length_size = (lsm1 & 3) + 1;
  std::vector<std::pair<const uint8_t*, size_t>> by_type[3];
  for (int a = 0; a < arrays; ++a) {
    uint8_t type;
    uint16_t n;
    BZNA_RETURN_IF_ERROR(f.Get(&type, "NAL_unit_type"));
    BZNA_RETURN_IF_ERROR(f.Get(&n, "numNalus"));
    type &= 0x3f;
    for (int k = 0; k < n; ++k) {
      uint16_t len;
      BZNA_RETURN_IF_ERROR(f.Get(&len, "nalUnitLength"));
      BZNA_RETURN_IF_ERROR(f.Need(len, "a parameter set NAL unit"));
      if (type >= 32 && type <= 34) by_type[type - 32].emplace_back(f.here(), len);
      BZNA_RETURN_IF_ERROR(f.Skip(len, "a parameter set NAL unit"));
    }
  }
  sets->clear();
  for (auto& v : by_type) sets->insert(sets->end(), v.begin(), v.end());
  return absl::OkStatus();
}

// The cached bytes [begin, end) of one per-image mp4 (offsets relative to it).
class Window {
 public:
  Window(const ByteSource& src, uint64_t base, uint64_t size) : src_(src), base_(base), size_(size) {}

  absl::Status Load(uint64_t b, uint64_t e) {
    e = std::min(e, size_);
    BZNA_RETURN_IF_ERROR(src_.Read(base_ + b, e - b, &data_));
    begin_ = b;
    return absl::OkStatus();
  }
  bool Covers(uint64_t pos, uint64_t n) const { return pos >= begin_ && pos + n <= begin_ + data_.size(); }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(data_.data()); }
  uint64_t begin() const { return begin_; }
  uint64_t end() const { return begin_ + data_.size(); }

 private:
  const ByteSource& src_;
  uint64_t base_, size_;
  uint64_t begin_ = 0;
  std::string data_;
};

// *out = the CRC-32C of bytes [from, to) of the per-image mp4 at `base`,
// continuing `crc`: from the window where it holds them, else read.
absl::Status CrcOf(const ByteSource& src, const Window& win, uint64_t base, uint64_t from, uint64_t to,
                   uint32_t crc, uint32_t* out) {
  if (to <= from) {
    *out = crc;
    return absl::OkStatus();
  }
  if (win.Covers(from, to - from)) {
    *out = Crc32cExtend(crc, win.data() + (from - win.begin()), to - from);
    return absl::OkStatus();
  }
  std::string bytes;
  BZNA_RETURN_IF_ERROR(src.Read(base + from, to - from, &bytes));
  *out = Crc32cExtend(crc, bytes.data(), bytes.size());
  return absl::OkStatus();
}

// The checksum table in the uuid box at `off` (usertype already matched).
// Another version or algorithm leaves index->checksums empty, as the Python
// reader does; a malformed table is an error. Needs the input count and
// has_thumb.
absl::Status ReadChecksums(const ByteSource& src, uint64_t off, uint64_t header, uint64_t size,
                           BznaIndex* index) {
  const Where top{&index->name, -1, 0};
  const uint64_t start = off + header + 16;
  const uint64_t length = size - header - 16;
  auto bad = [&](uint64_t at, const std::string& what) {
    return Err(top, "uuid", at, absl::StrCat("checksum table: ", what));
  };
  if (length < 4) return bad(off, absl::StrCat(length, " bytes of payload, too short for its version"));
  std::string head;
  BZNA_RETURN_IF_ERROR(src.Read(start, std::min<uint64_t>(length, kChecksumsFixed + 255 * 256), &head));
  const uint8_t* p = reinterpret_cast<const uint8_t*>(head.data());
  if (p[0] != kChecksumsVersion) return absl::OkStatus();
  if (length < kChecksumsFixed) {
    return bad(off, absl::StrCat(length, " bytes of payload, the fixed fields need ", kChecksumsFixed));
  }
  if (std::memcmp(p + 4, kChecksumsAlgorithm, 4) != 0) return absl::OkStatus();
  const uint64_t n = Be32(p + 8);
  if (n != static_cast<uint64_t>(index->num_samples())) {
    return bad(start + 8, absl::StrCat(n, " samples, the file has ", index->num_samples()));
  }
  const int k = p[24];
  uint64_t pos = kChecksumsFixed;
  std::vector<std::string> names;
  for (int j = 0; j < k; ++j) {
    if (pos >= head.size() || pos + 1 + p[pos] > head.size()) {
      return bad(start + pos, absl::StrCat("truncated track names: ", length, " bytes of payload"));
    }
    std::string name(reinterpret_cast<const char*>(p + pos + 1), p[pos]);
    if (std::find(names.begin(), names.end(), name) != names.end()) {
      return bad(start + pos, absl::StrCat("track '", name, "' listed twice"));
    }
    names.push_back(std::move(name));
    pos += 1 + p[pos];
  }
  const uint64_t expected = pos + 4 * static_cast<uint64_t>(k) * n;
  if (length != expected) {
    return bad(off, absl::StrCat(length, " bytes of payload, expected ", expected, " for ", k, " x ", n, " checksums"));
  }
  if (!index->has_thumb && std::find(names.begin(), names.end(), kThumb) != names.end()) {
    return bad(off, absl::StrCat("a '", kThumb, "' column, but the file has no '", kThumb, "' track"));
  }
  std::string column;
  for (int j = 0; j < k; ++j) {
    std::vector<uint32_t>* out = names[j] == kInput   ? &index->checksums.input
                                 : names[j] == kThumb ? &index->checksums.thumb
                                                      : nullptr;
    if (!out) continue;  // a track this reader does not know
    BZNA_RETURN_IF_ERROR(src.Read(start + pos + 4 * n * j, 4 * n, &column));
    const uint8_t* c = reinterpret_cast<const uint8_t*>(column.data());
    out->resize(n);
    for (uint64_t s = 0; s < n; ++s) (*out)[s] = Be32(c + 4 * s);
  }
  index->checksums.box_offset = off;
  index->checksums.has_index = true;
  index->checksums.index_at = start + 12;
  index->checksums.moov = Be32(p + 12);
  index->checksums.targets = Be32(p + 16);
  index->checksums.names = Be32(p + 20);
  return absl::OkStatus();
}

std::atomic<int> g_verify_checksums{-1};  // -1: not yet read from the environment
std::atomic<int64_t> g_verification_offs{0};  // SetChecksumVerification(false) calls

absl::Status AppendNals(const uint8_t* p, size_t n, int length_size, const Where& w, uint64_t at,
                        std::string* out) {
  // A 0-byte picture sample: no picture (the Python reader's words).
  if (n == 0) return Err(w, "mdat", at, "empty H.265 sample");
  size_t pos = 0;
  while (pos < n) {
    if (n - pos < static_cast<size_t>(length_size)) {
      return Err(w, "mdat", at + pos, absl::StrCat("truncated NAL length prefix: ", n - pos, " bytes left, need ",
                                                   length_size));
    }
    uint64_t len = 0;
    for (int k = 0; k < length_size; ++k) len = (len << 8) | p[pos + k];
    pos += length_size;
    if (len == 0 || len > n - pos) {
      return Err(w, "mdat", at + pos - length_size,
                 absl::StrCat("NAL unit length ", len, " is zero or runs past the end of the sample (", n - pos,
                              " bytes left)"));
    }
    out->append(kStartCode, 4);
    out->append(reinterpret_cast<const char*>(p + pos), len);
    pos += len;
  }
  return absl::OkStatus();
}

// `s` with every byte outside printable ASCII escaped: messages quote names
// read from the file, and Python must be able to decode the message.
std::string Printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// What a file that is not a .bzna looks like, from its first bytes: the twin
// of bzna_tf/format/sniff.py (the same table and words; the tests run every
// signature of the Python table through this reader).
constexpr size_t kSniffBytes = 512;

struct Magic {
  size_t offset;
  const char* bytes;
  size_t size;  // 0: unused
};

struct Signature {
  Magic parts[2];
  const char* what;
};

#define BZNA_MAGIC(offset, literal) \
  { offset, literal, sizeof(literal) - 1 }
constexpr Signature kSignatures[] = {
    {{BZNA_MAGIC(0, "\xff\xd8\xff")}, "a JPEG image"},
    {{BZNA_MAGIC(0, "\x89PNG\r\n\x1a\n")}, "a PNG image"},
    {{BZNA_MAGIC(0, "GIF87a")}, "a GIF image"},
    {{BZNA_MAGIC(0, "GIF89a")}, "a GIF image"},
    {{BZNA_MAGIC(0, "RIFF"), BZNA_MAGIC(8, "WEBP")}, "a WebP image"},
    {{BZNA_MAGIC(0, "RIFF"), BZNA_MAGIC(8, "AVI ")}, "an AVI video"},
    {{BZNA_MAGIC(0, "RIFF"), BZNA_MAGIC(8, "WAVE")}, "a WAV audio file"},
    {{BZNA_MAGIC(0, "II*\x00")}, "a TIFF image"},
    {{BZNA_MAGIC(0, "MM\x00*")}, "a TIFF image"},
    {{BZNA_MAGIC(0, "\x00\x00\x00\x0cjP  \r\n\x87\n")}, "a JPEG 2000 image"},
    {{BZNA_MAGIC(0, "\x00\x00\x00\x0cJXL \r\n\x87\n")}, "a JPEG XL image"},
    {{BZNA_MAGIC(0, "\xff\x0a")}, "a JPEG XL image"},
    {{BZNA_MAGIC(0, "\x00\x00\x00\x01\x40\x01")}, "an H.265 stream (Annex-B)"},
    {{BZNA_MAGIC(0, "\x1a" "E\xdf\xa3")}, "a Matroska or WebM video"},
    {{BZNA_MAGIC(0, "PK\x03\x04")}, "a zip archive"},
    {{BZNA_MAGIC(0, "PK\x05\x06")}, "a zip archive"},
    {{BZNA_MAGIC(0, "\x1f\x8b")}, "a gzip file"},
    {{BZNA_MAGIC(0, "BZh")}, "a bzip2 file"},
    {{BZNA_MAGIC(0, "\xfd" "7zXZ\x00")}, "an xz file"},
    {{BZNA_MAGIC(0, "(\xb5/\xfd")}, "a zstd file"},
    {{BZNA_MAGIC(0, "7z\xbc\xaf\x27\x1c")}, "a 7-Zip archive"},
    {{BZNA_MAGIC(257, "ustar")}, "a tar archive"},
    {{BZNA_MAGIC(0, "\x93NUMPY")}, "a NumPy .npy file"},
    {{BZNA_MAGIC(0, "\x89HDF\r\n\x1a\n")}, "an HDF5 file"},
    {{BZNA_MAGIC(0, "SQLite format 3\x00")}, "an SQLite database"},
    {{BZNA_MAGIC(0, "%PDF-")}, "a PDF document"},
    {{BZNA_MAGIC(0, "\x7f" "ELF")}, "an ELF executable or library"},
    {{BZNA_MAGIC(0, "version https://git-lfs.github.com/spec/")}, "a Git LFS pointer (run git lfs pull)"},
};
#undef BZNA_MAGIC

// ISO base media files that are not .bzna, by brand (4-character codes run
// together); a .bzna lists the brand 'bzna', and a file listing neither it
// nor one of these is read on.
constexpr struct {
  const char* brands;
  const char* what;
} kBrands[] = {
    {"avifavis", "an AVIF image"},
    {"heicheixheimheishevchevxhevmhevsmif1msf1", "a HEIF image"},
    {"crx ", "a Canon raw image"},
    {"qt  ", "a QuickTime movie"},
    {"M4A M4B M4P ", "an MPEG-4 audio file"},
    {"3gp43gp53gp63gp73g2a3g2b3g2c", "a 3GP video"},
    {"mp41mp42mp71avc1dashM4V f4v ", "an MP4 video"},
};

// What `head` (a file's first bytes, at most kSniffBytes) looks like, or
// nullptr when unknown or a .bzna.
const char* Sniff(const std::string& head) {
  if (head.empty()) return "an empty file";
  if (head.size() >= 8 && head.compare(4, 4, "ftyp") == 0) {
    const size_t end = std::min<size_t>(Be32(reinterpret_cast<const uint8_t*>(head.data())), head.size());
    std::vector<std::string> brands;
    if (end >= 12) brands.push_back(head.substr(8, 4));
    for (size_t k = 16; k + 4 <= end; k += 4) brands.push_back(head.substr(k, 4));
    if (std::find(brands.begin(), brands.end(), "bzna") != brands.end()) return nullptr;
    for (const auto& group : kBrands) {
      for (const char* b = group.brands; *b; b += 4) {
        if (std::find(brands.begin(), brands.end(), std::string(b, 4)) != brands.end()) return group.what;
      }
    }
    return nullptr;
  }
  for (const Signature& s : kSignatures) {
    bool match = true;
    for (const Magic& m : s.parts) {
      if (m.size > 0 && (m.offset + m.size > head.size() || head.compare(m.offset, m.size, m.bytes, m.size) != 0)) {
        match = false;
      }
    }
    if (match) return s.what;
  }
  if (head.size() >= 12) {  // TFRecord: a u64 length, then its masked CRC-32C (both little-endian)
    const uint32_t crc = Crc32c(head.data(), 8);
    const uint32_t masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
    const auto* p = reinterpret_cast<const uint8_t*>(head.data() + 8);
    if (masked == (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24)) {
      return "a TFRecord file (bzna-tf convert tfrecord makes a .bzna of it)";
    }
  }
  const auto text = [](unsigned char c) {
    return (c >= 0x20 && c != 0x7f) || c == '\t' || c == '\n' || c == '\f' || c == '\r';
  };
  if (std::all_of(head.begin(), head.end(), text)) {
    std::string start = head.substr(std::min(head.find_first_not_of(" \t\n\f\r"), head.size()), 14);
    for (char& c : start) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (start.rfind("<!doctype html", 0) == 0 || start.rfind("<html", 0) == 0) return "an HTML page";
    return "a text file";
  }
  return nullptr;
}

// Why a file starting with `head` is not a .bzna, or "" when it may be one.
std::string NotBznaReason(const std::string& head) {
  if (head.empty()) return "not a .bzna file: expected an 'ftyp' box first, found an empty file";
  const char* what = Sniff(head);
  if (head.size() >= 8 && head.compare(4, 4, "ftyp") == 0) {
    if (what == nullptr) return "";
    return absl::StrCat("not a .bzna file: it looks like ", what, " (its 'ftyp' box has the brand '",
                        head.substr(8, 4), "' and not 'bzna')");
  }
  const std::string start = absl::StrCat("the file starts with '", head.substr(0, 8), "'");
  if (what == nullptr) return absl::StrCat("not a .bzna file: expected an 'ftyp' box first, ", start);
  return absl::StrCat("not a .bzna file: it looks like ", what, " (expected an 'ftyp' box first, ", start, ")");
}

// Where `s` stops being UTF-8 as Python's strict decoder reads it, and why,
// in that decoder's words (so both readers name a bad filename alike);
// nullptr when all of it is. *at is the first byte of the offending sequence.
// Overlong forms, surrogates (U+D800..U+DFFF) and code points past U+10FFFF
// are refused: their lead byte, or their second byte, is out of range.
const char* Utf8Error(const std::string& s, size_t* at) {
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    *at = i;
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t more;
    uint8_t lo = 0x80, hi = 0xBF;  // the range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      more = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      more = 2;
      if (c == 0xE0) lo = 0xA0;  // overlong below U+0800
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      more = 3;
      if (c == 0xF0) lo = 0x90;  // overlong below U+10000
      if (c == 0xF4) hi = 0x8F;  // past U+10FFFF
    } else {
      return "invalid start byte";  // a continuation byte, C0/C1 (overlong) or F5..FF
    }
    for (size_t k = 1; k <= more; ++k) {
      if (i + k == n) return "unexpected end of data";
      const uint8_t b = static_cast<uint8_t>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return "invalid continuation byte";
    }
    i += more + 1;
  }
  return nullptr;
}

}  // namespace

bool ChecksumVerification() {
  // Acquire: a reader that sees verification off sees its turn-off counted (g_verification_offs).
  int v = g_verify_checksums.load(std::memory_order_acquire);
  if (v < 0) {
    std::string env;
    if (const char* e = std::getenv("BZNA_TF_VERIFY_CHECKSUMS")) env = e;
    for (char& c : env) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const int from_env = (env == "0" || env == "false" || env == "no" || env == "off") ? 0 : 1;
    g_verify_checksums.compare_exchange_strong(v, from_env);
    v = g_verify_checksums.load(std::memory_order_relaxed);
  }
  return v != 0;
}

bool SetChecksumVerification(bool on) {
  const bool previous = ChecksumVerification();
  if (!on) g_verification_offs.fetch_add(1, std::memory_order_seq_cst);  // counted before it takes effect
  g_verify_checksums.store(on ? 1 : 0, std::memory_order_seq_cst);
  return previous;
}

absl::Status FormatError(const std::string& file, int64_t sample, const std::string& box, int64_t offset,
                         const std::string& what) {
  std::string where = file;
  if (sample >= 0) absl::StrAppend(&where, ", sample ", sample);
  if (!box.empty()) absl::StrAppend(&where, ", box ", Printable(box));
  if (offset >= 0) absl::StrAppend(&where, ", byte offset ", offset);
  return absl::DataLossError(absl::StrCat(where, ": ", Printable(what)));
}

absl::Status CheckReadRange(const std::string& file, uint64_t size, uint64_t offset, size_t n) {
  if (offset <= size && n <= size - offset) return absl::OkStatus();
  return FormatError(file, -1, "", static_cast<int64_t>(offset),
                     absl::StrCat("needs bytes [", offset, ", ", offset + n, ") but the file has ", size, " bytes"));
}

absl::Status ReadBznaIndex(const ByteSource& src, BznaIndex* index) {
  const uint64_t size = src.size();
  index->name = src.name();
  index->file_size = size;
  Where top{&index->name, -1, 0};

  // Top-level boxes, from their headers alone.
  uint64_t moov_off = 0, moov_size = 0, moov_header = 0;
  uint64_t sums_off = 0, sums_size = 0, sums_header = 0;
  std::string seen, head, first;
  // A JPEG or an empty file, say, is named before its bytes are read as boxes.
  if (size > 0) BZNA_RETURN_IF_ERROR(src.Read(0, std::min<uint64_t>(kSniffBytes, size), &first));
  const std::string not_bzna = NotBznaReason(first);
  if (!not_bzna.empty()) return Err(top, "", 0, not_bzna);
  for (uint64_t off = 0; off < size;) {
    if (off == 0) {
      head = first.substr(0, 16);
    } else {
      BZNA_RETURN_IF_ERROR(src.Read(off, std::min<uint64_t>(16, size - off), &head));
    }
    std::string type, why;
    uint64_t header, box_size;
    const uint8_t* p = reinterpret_cast<const uint8_t*>(head.data());
    if (!ParseHeader(p, head.size(), size - off, &type, &header, &box_size, &why).ok()) {
      return Err(top, "file", off, why);
    }
    if (type == "moov" && moov_size == 0) {
      moov_off = off;
      moov_size = box_size;
      moov_header = header;
    }
    if (type == "uuid" && sums_size == 0 && box_size >= header + 16) {
      std::string user;
      BZNA_RETURN_IF_ERROR(src.Read(off + header, 16, &user));
      if (std::memcmp(user.data(), kChecksumsUuid, 16) == 0) {
        sums_off = off;
        sums_size = box_size;
        sums_header = header;
      }
    }
    absl::StrAppend(&seen, seen.empty() ? "" : ", ", type);
    off += box_size;
  }
  if (moov_size == 0) return Err(top, "", -1, absl::StrCat("no 'moov' box among the top-level boxes (", seen, ")"));
  if (moov_size > kMaxMoovBytes) {
    return Err(top, "moov", moov_off,
               absl::StrCat("moov of ", moov_size, " bytes is larger than any .bzna index (limit ", kMaxMoovBytes, ")"));
  }

  std::string moov_bytes;
  BZNA_RETURN_IF_ERROR(src.Read(moov_off, moov_size, &moov_bytes));
  const uint8_t* buf = reinterpret_cast<const uint8_t*>(moov_bytes.data());
  Where w{&index->name, -1, moov_off};
  Box moov{"moov", "moov", 0, static_cast<size_t>(moov_header), static_cast<size_t>(moov_size)};
  std::vector<Box> traks;
  BZNA_RETURN_IF_ERROR(Traks(buf, moov, w, &traks));
  std::map<std::string, Trak> by_name;
  for (Box& b : traks) {
    Trak t;
    BZNA_RETURN_IF_ERROR(ParseTrak(buf, b, w, size, false, &t));
    if (by_name.count(t.name)) return Err(w, t.box.path, b.begin, absl::StrCat("a second track named '", t.name, "'"));
    bool known = t.name == kInput || t.name == kTarget || t.name == kFname || t.name == kThumb;
    if (known) BZNA_RETURN_IF_ERROR(ParseSampleTable(buf, t.stbl, t.name, w, size, &t.table));
    by_name.emplace(t.name, std::move(t));
  }
  auto input = by_name.find(kInput);
  if (input == by_name.end()) {
    std::string names;
    for (auto& kv : by_name) absl::StrAppend(&names, names.empty() ? "" : ", ", kv.first);
    return Err(w, "moov", 0, absl::StrCat("no '", kInput, "' track (found: ", names.empty() ? "none" : names, ")"));
  }
  index->input = std::move(input->second.table);
  const int64_t n = index->input.count();
  for (const char* name : {kFname, kThumb}) {
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    if (it->second.table.count() != n) {
      return Err(w, it->second.box.path, it->second.box.begin,
                 absl::StrCat("track '", name, "' has ", it->second.table.count(),
                              it->second.table.count() == 1 ? " sample" : " samples", ", '", kInput, "' has ", n));
    }
    if (name == kFname) {
      index->fname = std::move(it->second.table);
      index->has_fname = true;
    } else {
      index->thumb = std::move(it->second.table);
      index->has_thumb = true;
    }
  }
  index->targets.clear();
  uint32_t targets_crc = 0;  // of the target samples in order, as the checksum table's covers them
  auto target = by_name.find(kTarget);
  if (target != by_name.end()) {
    const SampleTable& t = target->second.table;
    if (t.count() > n) {
      return Err(w, target->second.box.path, target->second.box.begin,
                 absl::StrCat("track '", kTarget, "' has ", t.count(), t.count() == 1 ? " sample" : " samples",
                              ", more than the ", n, " inputs"));
    }
    bool contiguous = true;
    for (int64_t k = 0; k < t.count(); ++k) {
      if (t.sizes[k] != 8) {
        return FormatError(index->name, k, absl::StrCat("trak[", kTarget, "]"), static_cast<int64_t>(t.offsets[k]),
                           absl::StrCat("target sample is ", t.sizes[k], " bytes, expected 8"));
      }
      if (k && t.offsets[k] != t.offsets[k - 1] + 8) contiguous = false;
    }
    index->targets.resize(t.count());
    std::string bytes;
    auto decode = [](const char* p) {
      uint64_t v = 0;
      for (int b = 7; b >= 0; --b) v = (v << 8) | static_cast<uint8_t>(p[b]);
      return static_cast<int64_t>(v);
    };
    if (contiguous && t.count()) {
      BZNA_RETURN_IF_ERROR(src.Read(t.offsets[0], 8 * t.count(), &bytes));
      for (int64_t k = 0; k < t.count(); ++k) index->targets[k] = decode(bytes.data() + 8 * k);
      targets_crc = Crc32c(bytes.data(), bytes.size());
    } else {
      for (int64_t k = 0; k < t.count(); ++k) {
        BZNA_RETURN_IF_ERROR(src.Read(t.offsets[k], 8, &bytes));
        index->targets[k] = decode(bytes.data());
        targets_crc = Crc32cExtend(targets_crc, bytes.data(), 8);
      }
    }
  }
  index->checksums = BznaChecksums();
  if (sums_size) BZNA_RETURN_IF_ERROR(ReadChecksums(src, sums_off, sums_header, sums_size, index));
  // A changed byte of a target is a wrong label, which no decoder notices: the targets are checked
  // against the table's checksum of them whenever they are read, whatever ChecksumVerification says
  // (as the Python reader does). The names are not read here (ReadFilename reads one).
  if (index->checksums.has_index && targets_crc != index->checksums.targets) {
    const std::string box = absl::StrCat("trak[", kTarget, "]");
    return FormatError(
        index->name, -1, box, -1,
        absl::StrCat("checksum mismatch of the targets (stored 0x",
                     absl::Hex(index->checksums.targets, absl::kZeroPad8), ", computed 0x",
                     absl::Hex(targets_crc, absl::kZeroPad8),
                     "): the index changed since the file was written (a damaged copy?), and its targets cannot "
                     "be trusted; `bzna-tf verify` checks the whole file. Restore or convert the file again"));
  }
  return absl::OkStatus();
}

absl::Status ReadPicture(const ByteSource& src, const BznaIndex& index, int64_t i, PictureTrack track,
                         Picture* out) {
  const uint64_t base = index.input.offsets[i];
  const uint64_t size = index.input.sizes[i];
  if (size == 0) {
    return FormatError(index.name, i, absl::StrCat("trak[", kInput, "]"), static_cast<int64_t>(base),
                       "input sample is 0 bytes, expected a per-image mp4");
  }
  const bool thumb = track == PictureTrack::kThumb;
  // Where the thumbnail picture starts in the per-image mp4, if the outer
  // index says so (size if not).
  uint64_t thumb_at = size;
  if (index.has_thumb) {
    uint64_t t = index.thumb.offsets[i];
    if (t >= base && t < base + size) thumb_at = t - base;
  }
  // Where the wanted picture starts: it lets one read fetch the picture
  // together with the moov that follows it.
  const uint64_t hint = thumb ? thumb_at : 0;
  const std::vector<uint32_t>& stored = thumb ? index.checksums.thumb : index.checksums.input;
  const bool verify = !stored.empty() && ChecksumVerification();
  if (verify && thumb && thumb_at == size) {
    return FormatError(index.name, i, "", -1,
                       absl::StrCat("the thumbnail picture starts at byte ",
                                    static_cast<int64_t>(index.thumb.offsets[i]) - static_cast<int64_t>(base),
                                    " of a ", size, "-byte per-image mp4 (outer '", kThumb,
                                    "' index): outside it, so its checksum cannot be checked"));
  }
  Window win(src, base, size);
  BZNA_RETURN_IF_ERROR(win.Load(0, std::min<uint64_t>(size, 64)));

  Where w{&index.name, i, base};
  uint64_t moov_begin = 0, moov_header = 0, moov_end = 0;
  // The thumbnail's checksum leaves out [head_end, thumb_at): head_end is the
  // first payload byte of the top-level box holding thumb_at.
  bool head_found = !(verify && thumb);
  uint64_t head_end = 0;
  uint32_t head_crc = 0;
  bool head_crc_known = false;
  for (uint64_t pos = 0; pos < size;) {
    uint64_t want = std::min<uint64_t>(16, size - pos);
    if (!win.Covers(pos, want)) {
      BZNA_RETURN_IF_ERROR(hint <= pos ? win.Load(hint, size) : win.Load(pos, std::min(size, pos + 4096)));
    }
    std::string type, why;
    uint64_t header, box_size;
    const uint8_t* p = win.data() + (pos - win.begin());
    if (!ParseHeader(p, win.end() - pos, size - pos, &type, &header, &box_size, &why).ok()) {
      return Err(w, "", pos, why);
    }
    if (pos == 0 && type != "ftyp") {
      return Err(w, "", 0, absl::StrCat("expected the per-image mp4 to start with 'ftyp', found '", type, "'"));
    }
    if (!head_found && thumb_at >= pos + header && thumb_at < pos + box_size) {
      head_found = true;
      head_end = pos + header;
      if (win.Covers(0, head_end)) {
        head_crc = Crc32c(win.data(), head_end);
        head_crc_known = true;
      }
    }
    if (type == "moov" && moov_end == 0) {
      moov_begin = pos;
      moov_header = header;
      moov_end = pos + box_size;
    }
    if (moov_end != 0 && head_found) break;
    pos += box_size;
  }
  if (moov_end == 0) return Err(w, "", 0, "the per-image mp4 has no 'moov' box");
  if (!head_found) {
    return FormatError(index.name, i, "", -1,
                       absl::StrCat("the thumbnail picture starts at byte ", thumb_at,
                                    " of the per-image mp4, in no top-level box's payload, so its checksum "
                                    "cannot be checked"));
  }
  if (!win.Covers(moov_begin, moov_end - moov_begin)) {
    BZNA_RETURN_IF_ERROR(win.Load(std::min(hint, moov_begin), moov_end));
  }

  // Parse the moov where it lies in the window.
  const uint8_t* buf = win.data();
  Where ww{&index.name, i, base + win.begin()};
  auto local = [&](uint64_t pos) { return static_cast<size_t>(pos - win.begin()); };
  Box moov{"moov", "moov", local(moov_begin), local(moov_begin + moov_header), local(moov_end)};
  std::vector<Box> traks;
  BZNA_RETURN_IF_ERROR(Traks(buf, moov, ww, &traks));
  const std::string wanted = track == PictureTrack::kThumb ? kThumb : kInput;
  Trak chosen;
  bool found_wanted = false, found_input = false;
  std::string names;
  for (const Box& b : traks) {
    Trak t;
    BZNA_RETURN_IF_ERROR(ParseTrak(buf, b, ww, size, false, &t));
    absl::StrAppend(&names, names.empty() ? "" : ", ", t.name);
    if (t.name == wanted && !found_wanted) {
      chosen = std::move(t);
      found_wanted = true;
    } else if (t.name == kInput && !found_input && !found_wanted) {
      chosen = std::move(t);  // a file without thumbnails: the input is the thumbnail
      found_input = true;
    }
  }
  if (!found_wanted && !(found_input && track == PictureTrack::kThumb)) {
    return Err(ww, "moov", moov.begin,
               absl::StrCat("the per-image mp4 has no '", wanted, "' track (found: ", names.empty() ? "none" : names, ")"));
  }
  BZNA_RETURN_IF_ERROR(ParseSampleTable(buf, chosen.stbl, chosen.name, ww, size, &chosen.table));
  if (chosen.table.count() < 1) {
    return Err(ww, chosen.stbl.path, chosen.stbl.begin, absl::StrCat("track '", chosen.name, "' has no sample"));
  }
  if (chosen.width <= 0 || chosen.height <= 0) {
    return Err(ww, chosen.box.path, chosen.box.begin,
               absl::StrCat("track '", chosen.name, "' has tkhd size ", chosen.width, "x", chosen.height));
  }
  Box stsd, entry, hvcc;
  BZNA_RETURN_IF_ERROR(Child(buf, chosen.stbl, "stsd", ww, &stsd));
  std::vector<Box> entries;
  if (stsd.end - stsd.body < 8) return Err(ww, stsd.path, stsd.begin, "truncated 'stsd': no sample entry");
  BZNA_RETURN_IF_ERROR(Children(buf, stsd, stsd.body + 8, ww, &entries));
  if (entries.empty()) return Err(ww, stsd.path, stsd.begin, "'stsd' has no sample entry");
  entry = entries[0];
  if (entry.type != "hvc1" && entry.type != "hev1") {
    return Err(ww, entry.path, entry.begin, absl::StrCat("sample entry is '", entry.type, "', expected 'hvc1'"));
  }
  if (entry.end - entry.body < kVisualSampleEntryBytes) {
    return Err(ww, entry.path, entry.begin, "truncated 'hvc1': shorter than a VisualSampleEntry");
  }
  std::vector<Box> kids;
  BZNA_RETURN_IF_ERROR(Children(buf, entry, entry.body + kVisualSampleEntryBytes, ww, &kids));
  auto it = std::find_if(kids.begin(), kids.end(), [](const Box& b) { return b.type == "hvcC"; });
  if (it == kids.end()) return Err(ww, entry.path, entry.begin, "no 'hvcC' box in the sample entry");
  hvcc = *it;
  std::vector<std::pair<const uint8_t*, size_t>> sets;
  int length_size;
  BZNA_RETURN_IF_ERROR(ParseHvcc(buf, hvcc, ww, &sets, &length_size));

  const uint64_t off = chosen.table.offsets[0], n = chosen.table.sizes[0];
  out->annexb.clear();
  out->annexb.reserve(n + 64 + 4096);
  for (const auto& s : sets) {
    out->annexb.append(kStartCode, 4);
    out->annexb.append(reinterpret_cast<const char*>(s.first), s.second);
  }
  if (win.Covers(off, n)) {
    BZNA_RETURN_IF_ERROR(AppendNals(buf + local(off), n, length_size, w, off, &out->annexb));
  } else {
    std::string bytes;
    BZNA_RETURN_IF_ERROR(src.Read(base + off, n, &bytes));
    BZNA_RETURN_IF_ERROR(AppendNals(reinterpret_cast<const uint8_t*>(bytes.data()), n, length_size, w, off,
                                    &out->annexb));
  }
  if (verify) {
    uint32_t crc = 0;
    uint64_t covered = size;
    if (!thumb) {
      BZNA_RETURN_IF_ERROR(CrcOf(src, win, base, 0, size, 0, &crc));
    } else {
      if (head_crc_known) {
        crc = head_crc;
      } else {
        BZNA_RETURN_IF_ERROR(CrcOf(src, win, base, 0, head_end, 0, &crc));
      }
      BZNA_RETURN_IF_ERROR(CrcOf(src, win, base, thumb_at, size, crc, &crc));
      covered = head_end + (size - thumb_at);
    }
    if (crc != stored[i]) {
      return FormatError(
          index.name, i, "", -1,
          absl::StrCat("checksum mismatch (stored 0x", absl::Hex(stored[i], absl::kZeroPad8), ", computed 0x",
                       absl::Hex(crc, absl::kZeroPad8), ") of its '", thumb ? kThumb : kInput, "' picture: the ",
                       covered, " bytes it covers in the per-image mp4 at byte offset ", base,
                       " changed since the file was written (damaged storage or copy)"));
    }
  }
  out->width = chosen.width;
  out->height = chosen.height;
  return absl::OkStatus();
}

// For Python (ctypes, bzna_tf.ops.verify_checksums): on < 0 only asks; else
// sets. Returns the value before the call.
extern "C" __attribute__((visibility("default"))) int bzna_tf_verify_checksums(int on) {
  return on < 0 ? ChecksumVerification() : SetChecksumVerification(on != 0);
}

// For Python (ctypes, bzna-tf verify): how many times verification was turned
// off in this process. Verification on before a read, on after it and this
// count unchanged: it was on throughout (another thread may toggle it).
extern "C" __attribute__((visibility("default"))) int64_t bzna_tf_verification_offs() {
  return g_verification_offs.load(std::memory_order_seq_cst);
}

absl::Status ReadFilename(const ByteSource& src, const BznaIndex& index, int64_t i, std::string* out) {
  if (!index.has_fname) {
    out->clear();
    return absl::OkStatus();
  }
  BZNA_RETURN_IF_ERROR(src.Read(index.fname.offsets[i], index.fname.sizes[i], out));
  if (!out->empty() && out->back() == '\0') out->pop_back();
  size_t at = 0;
  if (const char* why = Utf8Error(*out, &at)) {
    out->clear();
    return FormatError(index.name, i, "mdat", static_cast<int64_t>(index.fname.offsets[i] + at),
                       absl::StrCat("filename is not valid UTF-8 (", why, ")"));
  }
  return absl::OkStatus();
}

}  // namespace bzna_tf
