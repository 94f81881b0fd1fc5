// The .bzna source dataset (BznaDataset) and BznaNumSamples: thin adapters
// from lib/bzna_format to TensorFlow's filesystem layer and tf.data.

#include <algorithm>
#include <cstring>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#if defined(__unix__) || defined(__APPLE__)
#include <sys/resource.h>
#include <sys/stat.h>

#include <cerrno>
#endif

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "lib/bzna_format.h"
#include "ops/dataset_ops.h"
#include "tensorflow/core/framework/dataset.h"
#include "tensorflow/core/framework/model.h"
#include "tensorflow/core/framework/op_kernel.h"
#include "tensorflow/core/framework/tensor.h"
#include "tensorflow/core/platform/env.h"

namespace bzna_tf {
namespace bzna_dataset_kernels {  // this file's own (the ops build may compile files together)
namespace {

using ::tensorflow::data::DatasetBase;
using ::tensorflow::data::DatasetContext;
using ::tensorflow::data::DatasetIterator;
using ::tensorflow::DataTypeVector;
using ::tensorflow::data::IteratorContext;
using ::tensorflow::data::IteratorStateReader;
using ::tensorflow::data::IteratorStateWriter;
using ::tensorflow::OpKernelContext;
using ::tensorflow::PartialTensorShape;
using ::tensorflow::data::SerializationContext;
using ::tensorflow::Tensor;
using ::tensorflow::tstring;

constexpr char kNextKey[] = "next";  // position in `indices` of the next element

// How many .bzna files the kernels keep open at once, in the whole process: a
// quarter of the descriptor limit (`ulimit -n`), between 16 and 512, so that a
// dataset of more files than that (1,000 shards under the usual limit of
// 1,024) still runs, and leaves descriptors to the rest of the program. Read
// at each reopen: a limit raised later counts.
size_t MaxOpenFiles() {
  uint64_t limit = 1024;
#if defined(__unix__) || defined(__APPLE__)
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) limit = rl.rlim_cur;
#endif
  return static_cast<size_t>(std::clamp<uint64_t>(limit / 4, 16, 512));
}

// The open handles of every TfFile, least recently used last; beyond
// MaxOpenFiles() the oldest is dropped (its descriptor closes when the last
// read holding it ends) and its TfFile reopens it on its next read.
class OpenHandles {
 public:
  using Handle = std::shared_ptr<tensorflow::RandomAccessFile>;

  static OpenHandles& Global() {
    static auto* handles = new OpenHandles();
    return *handles;
  }

  // `owner`'s handle, or null when it has none open.
  Handle Find(const void* owner) {
    absl::MutexLock lock(&mu_);
    auto it = where_.find(owner);
    if (it == where_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }

  // Keeps `file` as `owner`'s handle and returns it (or the one another thread
  // kept first), dropping the least recently used handles beyond the cap.
  Handle Keep(const void* owner, Handle file) {
    std::vector<Handle> dropped;  // closed after the lock is released
    absl::MutexLock lock(&mu_);
    auto it = where_.find(owner);
    if (it != where_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->second;
    }
    lru_.emplace_front(owner, file);
    where_[owner] = lru_.begin();
    for (const size_t cap = MaxOpenFiles(); lru_.size() > cap;) {
      dropped.push_back(std::move(lru_.back().second));
      where_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return file;
  }

  void Forget(const void* owner) {
    Handle dropped;
    absl::MutexLock lock(&mu_);
    auto it = where_.find(owner);
    if (it == where_.end()) return;
    dropped = std::move(it->second->second);
    lru_.erase(it->second);
    where_.erase(it);
  }

 private:
  absl::Mutex mu_;
  std::list<std::pair<const void*, Handle>> lru_ ABSL_GUARDED_BY(mu_);
  std::map<const void*, std::list<std::pair<const void*, Handle>>::iterator> where_ ABSL_GUARDED_BY(mu_);
};

// ------------------------------------------------------------ which file a name leads to

// What a file is, as far as can be told without reading it. For a local path
// (no "://", as bzna_tf.format.reader.is_url) stat(2) gives the modification
// time to the nanosecond (TensorFlow's local filesystem rounds it to the
// second) and which file the name leads to (device, inode: another file
// renamed over it has another inode); for a URL, what its TensorFlow
// filesystem says (size and modification time; GCS and S3 have no inodes).
struct FileStat {
  uint64_t size = 0;
  int64_t mtime_nsec = 0;
  uint64_t device = 0;  // local paths only, else 0
  uint64_t inode = 0;
  bool is_directory = false;
  // Local paths only: what the path is when it is neither a regular file nor
  // a directory (a FIFO, whose open would wait for a writer; a socket; a
  // device), else null. Not part of the comparison.
  const char* special = nullptr;

  bool operator==(const FileStat& o) const {
    return size == o.size && mtime_nsec == o.mtime_nsec && device == o.device && inode == o.inode &&
           is_directory == o.is_directory;
  }
  bool operator!=(const FileStat& o) const { return !(*this == o); }
};

bool IsUrl(const std::string& name) { return name.find("://") != std::string::npos; }

// "<seconds>.<nanoseconds>" since the epoch, how errors give a modification time.
std::string Mtime(int64_t ns) {
  if (ns < 0) return absl::StrCat(ns, " ns");
  return absl::StrCat(ns / 1000000000, ".", absl::Dec(ns % 1000000000, absl::kZeroPad9));
}

// "modified at <then> then, <now> now", how errors say that a file was modified.
std::string Modified(int64_t then, int64_t now) {
  return absl::StrCat("modified at ", Mtime(then), " then, ", Mtime(now), " now");
}

absl::Status StatFile(const std::string& name, FileStat* out) {
  tensorflow::FileStatistics tf_stat;
  TF_RETURN_IF_ERROR(tensorflow::Env::Default()->Stat(name, &tf_stat));
  *out = FileStat();
  out->size = static_cast<uint64_t>(tf_stat.length);
  out->mtime_nsec = tf_stat.mtime_nsec;
  out->is_directory = tf_stat.is_directory;
#if defined(__unix__) || defined(__APPLE__)
  if (!IsUrl(name)) {
    struct stat st;
    if (::stat(name.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(name, "; ", std::strerror(errno)));
    }
#if defined(__APPLE__)
    const struct timespec& m = st.st_mtimespec;
#else
    const struct timespec& m = st.st_mtim;
#endif
    out->size = static_cast<uint64_t>(st.st_size);
    out->mtime_nsec = static_cast<int64_t>(m.tv_sec) * 1000000000 + m.tv_nsec;
    out->device = static_cast<uint64_t>(st.st_dev);
    out->inode = static_cast<uint64_t>(st.st_ino);
    out->is_directory = S_ISDIR(st.st_mode);
    if (S_ISFIFO(st.st_mode)) {
      out->special = "a FIFO (named pipe)";
    } else if (S_ISSOCK(st.st_mode)) {
      out->special = "a socket";
    } else if (S_ISCHR(st.st_mode)) {
      out->special = "a character device";
    } else if (S_ISBLK(st.st_mode)) {
      out->special = "a block device";
    } else if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
      out->special = "a special file";
    }
  }
#endif
  return absl::OkStatus();
}

// How `now` differs from `then` ("" when it does not), for errors.
std::string StatDifference(const FileStat& then, const FileStat& now) {
  if (then.size != now.size) return absl::StrCat(then.size, " bytes then, ", now.size, " now");
  if (then.device != now.device || then.inode != now.inode) {
    return absl::StrCat("another file under that name: inode ", then.inode, " then, ", now.inode, " now");
  }
  if (then.mtime_nsec != now.mtime_nsec) {
    return Modified(then.mtime_nsec, now.mtime_nsec);
  }
  if (then.is_directory != now.is_directory) return "a directory now";
  return "";
}

std::string Hex32(int64_t c) { return absl::StrCat("0x", absl::Hex(c, absl::kZeroPad8)); }

// How the index checksums (moov, targets, names) of a checksum table differ,
// for errors.
std::string IndexChecksumsDifference(int64_t moov, int64_t targets, int64_t names, int64_t moov_now,
                                     int64_t targets_now, int64_t names_now) {
  return absl::StrCat("index checksums (moov, targets, names) ", Hex32(moov), ", ", Hex32(targets), ", ",
                      Hex32(names), " then, ", Hex32(moov_now), ", ", Hex32(targets_now), ", ", Hex32(names_now),
                      " now");
}

// The path to open for `name`: a relative local path is taken from
// `working_directory` (the ops' attribute: the working directory when the
// dataset was made, so that a later chdir does not lead the ops to another
// file), a URL or an absolute path, or any name without one, as it is.
std::string PathOf(const std::string& name, const std::string& working_directory) {
  if (working_directory.empty() || name.empty() || name[0] == '/' || IsUrl(name)) return name;
  return absl::StrCat(working_directory, absl::EndsWith(working_directory, "/") ? "" : "/", name);
}

// One file through TensorFlow's filesystem layer (local, gs://, s3://, ...),
// opened while it is read (see OpenHandles). A reopened file must still be
// the one whose index was read: the same FileStat. `name` is how errors name
// it (as the caller did), `path` what is opened (PathOf).
class TfFile : public ByteSource {
 public:
  static absl::Status Open(const std::string& name, const std::string& path, const FileStat& stat,
                           std::unique_ptr<TfFile>* out) {
    std::unique_ptr<tensorflow::RandomAccessFile> file;
    TF_RETURN_IF_ERROR(tensorflow::Env::Default()->NewRandomAccessFile(path, &file));
    out->reset(new TfFile(name, path, stat));
    OpenHandles::Global().Keep(out->get(), std::move(file));
    return absl::OkStatus();
  }

  ~TfFile() override { OpenHandles::Global().Forget(this); }

  const std::string& name() const override { return name_; }
  const std::string& path() const { return path_; }
  uint64_t size() const override { return stat_.size; }
  // What the file was when it was opened (and its index read).
  const FileStat& stat() const { return stat_; }

  // Set once its index is read, before the file is shared: the checksum
  // table's stored index checksums, which tell this conversion of the file
  // from another when only its time (or inode) changed.
  void KeepIndexChecksums(const BznaChecksums& c) { sums_ = c; }

  // Whether the file now at this name, whose stat differs from stat() but for
  // its size, holds the same conversion: it has a checksum table whose index
  // checksums are the ones read with the index (a file touched, or copied
  // back under its name). Reads 12 bytes through a fresh handle.
  bool SameConversion(const FileStat& now) const {
    if (!sums_.has_index || now.size != stat_.size || now.is_directory) return false;
    uint32_t sums[3];
    return IndexChecksumsNow(sums) && sums[0] == sums_.moov && sums[1] == sums_.targets && sums[2] == sums_.names;
  }

  // How the index checksums in the file now differ from those read with its
  // index ("" when they do not, or cannot be read, or it has no checksum
  // table): what tells a file rewritten in place under the same size,
  // modification time and inode. Reads 12 bytes through a fresh handle.
  std::string IndexChecksumChange() const {
    uint32_t sums[3];
    if (!sums_.has_index || !IndexChecksumsNow(sums)) return "";
    if (sums[0] == sums_.moov && sums[1] == sums_.targets && sums[2] == sums_.names) return "";
    return IndexChecksumsDifference(sums_.moov, sums_.targets, sums_.names, sums[0], sums[1], sums[2]);
  }

  absl::Status Read(uint64_t offset, size_t n, std::string* out) const override {
    TF_RETURN_IF_ERROR(CheckReadRange(name_, stat_.size, offset, n));
    OpenHandles::Handle file;
    TF_RETURN_IF_ERROR(Handle(&file));
    out->resize(n);
    absl::string_view got;
    absl::Status s = file->Read(offset, n, &got, out->data());
    if (!s.ok() && !absl::IsOutOfRange(s)) return s;
    if (got.size() != n) {
      return FormatError(name_, -1, "", static_cast<int64_t>(offset),
                         absl::StrCat("short read: ", got.size(), " of ", n,
                                      " bytes (file truncated while open?)"));
    }
    // Some filesystems answer from their own cache instead of the scratch buffer.
    if (got.data() != out->data()) std::memmove(out->data(), got.data(), n);
    return absl::OkStatus();
  }

 private:
  TfFile(std::string name, std::string path, const FileStat& stat)
      : name_(std::move(name)), path_(std::move(path)), stat_(stat) {}

  // The moov, targets and names checksums stored where the checksum table
  // read with the index keeps them, read now through a fresh handle (false
  // when they cannot be read).
  bool IndexChecksumsNow(uint32_t out[3]) const {
    std::unique_ptr<tensorflow::RandomAccessFile> file;
    if (!tensorflow::Env::Default()->NewRandomAccessFile(path_, &file).ok()) return false;
    char buf[12];
    absl::string_view got;
    const absl::Status s = file->Read(sums_.index_at, sizeof(buf), &got, buf);
    if ((!s.ok() && !absl::IsOutOfRange(s)) || got.size() != sizeof(buf)) return false;
    const auto* b = reinterpret_cast<const uint8_t*>(got.data());
    for (int k = 0; k < 3; ++k) out[k] = Be32(b + 4 * k);
    return true;
  }

  // The open handle, reopening the file when OpenHandles dropped it. A file
  // that is gone or changed fails with FailedPrecondition, which on_error =
  // "skip" does not skip: every later sample of it would fail the same way.
  absl::Status Handle(OpenHandles::Handle* out) const {
    if ((*out = OpenHandles::Global().Find(this))) return absl::OkStatus();
    FileStat now;
    absl::Status s = StatFile(path_, &now);
    if (!s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name_, ": cannot reopen the file (", s.message(), "); build the dataset again"));
    }
    if (now != stat_ && !SameConversion(now)) {
      return absl::FailedPreconditionError(absl::StrCat(
          name_, ": the file changed since its index was read (", StatDifference(stat_, now),
          "): its index would name the wrong pictures; build the dataset again"));
    }
    std::unique_ptr<tensorflow::RandomAccessFile> file;
    s = tensorflow::Env::Default()->NewRandomAccessFile(path_, &file);
    if (!s.ok()) {
      if (absl::IsResourceExhausted(s)) return s;
      return absl::FailedPreconditionError(
          absl::StrCat(name_, ": cannot reopen the file (", s.message(), "); build the dataset again"));
    }
    *out = OpenHandles::Global().Keep(this, std::move(file));
    return absl::OkStatus();
  }

  const std::string name_;
  const std::string path_;
  const FileStat stat_;
  BznaChecksums sums_;  // of the index read (KeepIndexChecksums); has_index false until then
};

// Sample `local` of `file` failed to read with `s`: the error named
// "<file>, sample <local>: ..." (byte-level read errors name only the file).
absl::Status Named(const std::string& file, int64_t local, const absl::Status& s) {
  if (s.ok()) return s;
  const std::string sample = absl::StrCat(file, ", sample ", local);
  absl::string_view m = s.message();
  if (absl::StartsWith(m, sample)) return s;
  if (absl::StartsWith(m, file) && absl::StartsWith(m.substr(file.size()), ", ")) m.remove_prefix(file.size() + 2);
  return absl::Status(s.code(), absl::StrCat(sample, ": ", m));
}

// An open file and its parsed index, shared by every dataset that reads it.
struct OpenFile {
  std::unique_ptr<TfFile> file;
  BznaIndex index;
};

// The file a caller's index was read from: one entry of the ops' `identities`
// attribute (five int64 per file, bzna_tf.format.BznaFile.identity): its
// size, its modification time in ns (measured as FileStat does), and the
// index checksums of its checksum table (moov, targets, names; -1 without a
// table).
struct Identity {
  int64_t size = 0;
  int64_t mtime_nsec = 0;
  int64_t moov = -1;
  int64_t targets = -1;
  int64_t names = -1;
};

constexpr int kIdentityFields = 5;

// The identities of `num_files` files from the attribute's values: none
// (no check: graphs saved before the attribute) or five per file.
absl::Status ParseIdentities(const std::vector<int64_t>& flat, size_t num_files, std::vector<Identity>* out) {
  out->clear();
  if (flat.empty()) return absl::OkStatus();
  if (flat.size() != num_files * kIdentityFields) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected ", kIdentityFields, " identity values per file (", num_files, num_files == 1 ? " file" : " files",
        "). Received: ", flat.size(), " values"));
  }
  for (size_t k = 0; k < num_files; ++k) {
    const int64_t* v = flat.data() + k * kIdentityFields;
    Identity id{v[0], v[1], v[2], v[3], v[4]};
    const bool none = id.moov == -1 && id.targets == -1 && id.names == -1;
    auto crc = [](int64_t c) { return c >= 0 && c <= 0xffffffffLL; };
    if (id.size < 0 || !(none || (crc(id.moov) && crc(id.targets) && crc(id.names)))) {
      return absl::InvalidArgumentError(absl::StrCat("identity of file ", k, " is not one: size ", id.size,
                                                     ", checksums ", id.moov, ", ", id.targets, ", ", id.names));
    }
    out->push_back(id);
  }
  return absl::OkStatus();
}

// How the open file `f` differs from the one the caller's index was read
// from ("" when it does not): its size; then, when the caller saw a checksum
// table, the index checksums stored in it (they tell two conversions apart
// also when the sizes agree and the modification times cannot: whole seconds
// on some filesystems), else the modification time.
std::string IdentityDifference(const OpenFile& f, const Identity& want) {
  const FileStat& now = f.file->stat();
  if (static_cast<uint64_t>(want.size) != now.size) return absl::StrCat(want.size, " bytes then, ", now.size, " now");
  const BznaChecksums& c = f.index.checksums;
  if (want.moov >= 0) {
    if (!c.has_index) return "a checksum table then, none now";
    if (c.moov != want.moov || c.targets != want.targets || c.names != want.names) {
      return IndexChecksumsDifference(want.moov, want.targets, want.names, c.moov, c.targets, c.names);
    }
    return "";
  }
  if (c.has_index) return "no checksum table then, one now";
  if (want.mtime_nsec != now.mtime_nsec) {
    return Modified(want.mtime_nsec, now.mtime_nsec);
  }
  return "";
}

absl::Status Changed(const std::string& name, const std::string& difference) {
  return absl::FailedPreconditionError(
      absl::StrCat(name, ": the file changed since the dataset was opened (converted again or replaced: ", difference,
                   "), so the dataset's index would name the wrong pictures: build the dataset again"));
}

// How a file whose stat is `now` differs from `want` as far as the stat tells
// ("" when it does not): its size, and for a file that had no checksum table,
// its modification time. Compared before the index is parsed: a file
// truncated since is refused as changed, not as a damaged one.
std::string StatIdentityDifference(const FileStat& now, const Identity& want) {
  if (static_cast<uint64_t>(want.size) != now.size) return absl::StrCat(want.size, " bytes then, ", now.size, " now");
  if (want.moov < 0 && want.mtime_nsec != now.mtime_nsec) return Modified(want.mtime_nsec, now.mtime_nsec);
  return "";
}

// Opens `name` (at `path`, PathOf), reusing the index parsed by a live
// dataset when the file is unchanged (its FileStat: a pipeline rebuilt every
// epoch must not re-read a 45 MB moov each time). With `want`, the file must
// be the one it describes (else FailedPrecondition, Changed()).
absl::Status OpenBzna(const std::string& name, const std::string& path, const Identity* want,
                      std::shared_ptr<const OpenFile>* out) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new std::map<std::string, std::weak_ptr<const OpenFile>>();
  FileStat stat;
  if (absl::Status s = StatFile(path, &stat); !s.ok()) {
    // Named as the caller named it.
    return path == name ? s : absl::Status(s.code(), absl::StrReplaceAll(s.message(), {{path, name}}));
  }
  if (stat.is_directory) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is a directory, expected a .bzna file"));
  }
  if (stat.special != nullptr) {  // refused before it is opened: a FIFO's open waits for a writer
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": not a regular file but ", stat.special,
        ": a .bzna file is read at offsets from its index, so it must be a file on a disk (copy the data to one)"));
  }
  if (want) {
    const std::string difference = StatIdentityDifference(stat, *want);
    if (!difference.empty()) return Changed(name, difference);
  }
  const std::string key = absl::StrCat(name, "\n", path, "\n", stat.size, "\n", stat.mtime_nsec, "\n", stat.device,
                                       "\n", stat.inode);
  absl::MutexLock lock(&mu);
  auto it = cache->find(key);
  out->reset();
  if (it != cache->end()) {
    // A cached index that is not the caller's file is read again: a remote
    // file replaced within its filesystem's time resolution has the same
    // FileStat.
    if ((*out = it->second.lock()) && (!want || IdentityDifference(**out, *want).empty())) {
      return absl::OkStatus();
    }
  }
  auto file = std::make_shared<OpenFile>();
  TF_RETURN_IF_ERROR(TfFile::Open(name, path, stat, &file->file));
  absl::Status s = ReadBznaIndex(*file->file, &file->index);
  if (!s.ok()) {
    // A file of the caller's size whose index does not parse any more, and
    // that was modified since: rewritten in place, not damaged.
    if (want && want->mtime_nsec != stat.mtime_nsec) return Changed(name, Modified(want->mtime_nsec, stat.mtime_nsec));
    return s;
  }
  file->file->KeepIndexChecksums(file->index.checksums);
  if (want) {
    const std::string difference = IdentityDifference(*file, *want);
    if (!difference.empty()) return Changed(name, difference);
  }
  for (auto e = cache->begin(); e != cache->end();) {  // forget files no dataset holds
    e = e->second.expired() ? cache->erase(e) : std::next(e);
  }
  (*cache)[key] = file;
  *out = std::move(file);
  return absl::OkStatus();
}

// OK when `f` is still the file at its name: an iterator starting on a
// dataset made earlier refuses a file converted again since (its handle may
// still read the old file, or may have been closed, and a file rewritten in
// place reads the new bytes through it).
absl::Status CheckUnchanged(const OpenFile& f) {
  FileStat now;
  absl::Status s = StatFile(f.file->path(), &now);
  if (!s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(f.file->name(), ": cannot find the file again (", s.message(),
                                                      "); build the dataset again"));
  }
  const std::string difference = StatDifference(f.file->stat(), now);
  if (difference.empty() || f.file->SameConversion(now)) return absl::OkStatus();
  return Changed(f.file->name(), difference);
}

// `s`, the error of a sample of `f` that could not be read (a short read, a
// box that does not parse, a checksum mismatch), or FailedPrecondition
// (Changed()) when the file opened changed under the reads: truncated, or
// rewritten in place (a copy of another conversion over it) by a running
// pipeline. Its index then names bytes of another content, so every later
// sample would fail the same way (or read another picture): not a bad sample
// to skip. Only failures pay for the check (a stat; for a file whose stat did
// not change and that has a checksum table, a 12-byte read).
absl::Status UnlessChanged(const OpenFile& f, const absl::Status& s) {
  if (s.ok() || absl::IsFailedPrecondition(s)) return s;
  FileStat now;
  if (!StatFile(f.file->path(), &now).ok()) return s;  // gone: the reads go on through the open handle
  const FileStat& then = f.file->stat();
  // Another file renamed over it: the reads go on through the handle on the
  // one opened (TfFile refuses to reopen it), and `s` is that file's.
  if (now.device != then.device || now.inode != then.inode) return s;
  std::string difference = StatDifference(then, now);
  if (difference.empty()) {
    difference = f.file->IndexChecksumChange();
  } else if (f.file->SameConversion(now)) {
    return s;  // touched, or copied back under its name: the sample's own error
  }
  return difference.empty() ? s : Changed(f.file->name(), difference);
}

// Opens the files of `names` (a scalar or a vector), relative ones from
// `working_directory` when it is not empty (PathOf); with `identities` (empty
// or one per file), each must be the file its identity describes.
absl::Status OpenAll(const Tensor& names, const std::vector<int64_t>& identities, const std::string& working_directory,
                     std::vector<std::string>* filenames, std::vector<std::shared_ptr<const OpenFile>>* files) {
  if (names.dims() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected filenames as a scalar or a vector. Received: shape ", names.shape().DebugString()));
  }
  auto flat = names.flat<tstring>();
  if (flat.size() == 0) {
    return absl::InvalidArgumentError("expected at least one .bzna file. Received: filenames=[]");
  }
  std::vector<Identity> want;
  TF_RETURN_IF_ERROR(ParseIdentities(identities, flat.size(), &want));
  for (int64_t k = 0; k < flat.size(); ++k) {
    filenames->emplace_back(flat(k));
    std::shared_ptr<const OpenFile> f;
    TF_RETURN_IF_ERROR(OpenBzna(filenames->back(), PathOf(filenames->back(), working_directory),
                                want.empty() ? nullptr : &want[k], &f));
    files->push_back(std::move(f));
  }
  return absl::OkStatus();
}

// Hands out positions 0 .. n-1 in `indices`, for tf.data service's
// "distributed_epoch" mode: the dispatcher owns one of these and each worker's
// iterator asks it for the next position, so every sample is read once.
class PositionSplitProvider : public tensorflow::data::SplitProvider {
 public:
  explicit PositionSplitProvider(int64_t n) : n_(n) {}

  absl::Status GetNext(Tensor* split, bool* end_of_splits) override {
    absl::MutexLock lock(&mu_);
    *end_of_splits = next_ >= n_;
    if (!*end_of_splits) *split = Tensor(int64_t{next_++});
    return absl::OkStatus();
  }
  absl::Status Reset() override {
    absl::MutexLock lock(&mu_);
    next_ = 0;
    return absl::OkStatus();
  }
  absl::Status Save(std::function<std::string(std::string)> full_name, IteratorStateWriter* writer) override {
    absl::MutexLock lock(&mu_);
    return writer->WriteScalar(full_name(kNextKey), next_);
  }
  absl::Status Restore(std::function<std::string(std::string)> full_name, IteratorStateReader* reader) override {
    absl::MutexLock lock(&mu_);
    TF_RETURN_IF_ERROR(reader->ReadScalar(full_name(kNextKey), &next_));
    if (next_ < 0 || next_ > n_) {
      return absl::DataLossError(absl::StrCat("restoring BznaDataset splits: saved position ", next_,
                                              " is outside [0, ", n_, "]"));
    }
    return absl::OkStatus();
  }
  int64_t Cardinality() const override { return n_; }

 private:
  absl::Mutex mu_;
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;
  const int64_t n_;
};

class Dataset : public DatasetBase {
 public:
  Dataset(OpKernelContext* ctx, std::vector<std::string> filenames, std::vector<std::shared_ptr<const OpenFile>> files,
          Tensor indices, std::string track, bool with_filename, std::vector<int64_t> identities,
          std::string working_directory)
      : DatasetBase(DatasetContext(ctx)),
        filenames_(std::move(filenames)),
        files_(std::move(files)),
        indices_(std::move(indices)),
        track_(std::move(track)),
        with_filename_(with_filename),
        identities_(std::move(identities)),
        working_directory_(std::move(working_directory)) {
    int64_t start = 0;
    for (const auto& f : files_) {
      starts_.push_back(start);
      start += f->index.num_samples();
    }
    dtypes_.push_back(tensorflow::DT_STRING);  // data
    if (with_filename_) dtypes_.push_back(tensorflow::DT_STRING);
    for (auto t : {tensorflow::DT_INT32, tensorflow::DT_INT64, tensorflow::DT_INT64, tensorflow::DT_INT32}) {
      dtypes_.push_back(t);  // height, index, target, width
    }
    shapes_.assign(dtypes_.size(), PartialTensorShape({}));
  }

  std::unique_ptr<tensorflow::data::IteratorBase> MakeIteratorInternal(const std::string& prefix) const override {
    return std::make_unique<Iterator>(Iterator::Params{this, absl::StrCat(prefix, "::Bzna")});
  }
  const DataTypeVector& output_dtypes() const override { return dtypes_; }
  const std::vector<PartialTensorShape>& output_shapes() const override { return shapes_; }
  std::string DebugString() const override { return "BznaDatasetOp::Dataset"; }
  int64_t CardinalityInternal(tensorflow::data::CardinalityOptions) const override { return indices_.NumElements(); }
  absl::Status InputDatasets(std::vector<const DatasetBase*>*) const override { return absl::OkStatus(); }
  absl::Status MakeSplitProviders(
      std::vector<std::unique_ptr<tensorflow::data::SplitProvider>>* split_providers) const override {
    split_providers->push_back(std::make_unique<PositionSplitProvider>(indices_.NumElements()));
    return absl::OkStatus();
  }
  absl::Status CheckExternalState() const override { return absl::OkStatus(); }

  // One element, for global sample `global`.
  absl::Status Produce(int64_t global, std::vector<Tensor>* out) const {
    const size_t k = std::upper_bound(starts_.begin(), starts_.end(), global) - starts_.begin() - 1;
    const int64_t local = global - starts_[k];
    const OpenFile& f = *files_[k];
    Picture pic;
    TF_RETURN_IF_ERROR(UnlessChanged(
        f, Named(f.file->name(), local,
                 ReadPicture(*f.file, f.index, local,
                             track_ == "input" ? PictureTrack::kInput : PictureTrack::kThumb, &pic))));
    out->emplace_back(tstring(std::move(pic.annexb)));
    if (with_filename_) {
      std::string name;
      TF_RETURN_IF_ERROR(
          UnlessChanged(f, Named(f.file->name(), local, ReadFilename(*f.file, f.index, local, &name))));
      out->emplace_back(tstring(std::move(name)));
    }
    out->emplace_back(static_cast<int32_t>(pic.height));
    out->emplace_back(static_cast<int64_t>(global));
    out->emplace_back(static_cast<int64_t>(f.index.target(local)));
    out->emplace_back(static_cast<int32_t>(pic.width));
    return absl::OkStatus();
  }

 protected:
  absl::Status AsGraphDefInternal(SerializationContext* ctx, DatasetGraphDefBuilder* b,
                                  tensorflow::Node** output) const override {
    tensorflow::Node* filenames = nullptr;
    tensorflow::Node* indices = nullptr;
    TF_RETURN_IF_ERROR(b->AddVector(filenames_, &filenames));
    TF_RETURN_IF_ERROR(b->AddTensor(indices_, &indices));
    tensorflow::AttrValue track, with_filename, identities, working_directory;
    b->BuildAttrValue(track_, &track);
    b->BuildAttrValue(with_filename_, &with_filename);
    b->BuildAttrValue(identities_, &identities);
    b->BuildAttrValue(working_directory_, &working_directory);
    return b->AddDataset(this, {filenames, indices},
                         {{kTrackAttr, track},
                          {kWithFilenameAttr, with_filename},
                          {kIdentitiesAttr, identities},
                          {kWorkingDirectoryAttr, working_directory}},
                         output);
  }

 private:
  class Iterator : public DatasetIterator<Dataset> {
   public:
    explicit Iterator(const Params& params) : DatasetIterator<Dataset>(params) {}

    // Its state is a cursor (the next position, or the split provider's):
    // tf.data saves it after each element, as symbolic checkpoints need.
    // (No `override`: TensorFlow 2.16's IteratorBase does not declare it yet.)
    bool SymbolicCheckpointCompatible() const { return true; }

    absl::Status Initialize(IteratorContext* ctx) override {
      const auto& providers = ctx->split_providers();
      if (providers.size() > 1) {
        return absl::FailedPreconditionError(
            absl::StrCat("BznaDataset takes one split provider, got ", providers.size()));
      }
      if (!providers.empty()) split_provider_ = providers[0];
      // The dataset opened its files when it was made; each iterator (each
      // epoch, a restored checkpoint) checks that they are still those.
      for (const auto& f : dataset()->files_) TF_RETURN_IF_ERROR(CheckUnchanged(*f));
      return absl::OkStatus();
    }

    absl::Status GetNextInternal(IteratorContext* ctx, std::vector<Tensor>* out_tensors,
                                 bool* end_of_sequence) override {
      absl::MutexLock lock(&mu_);
      const auto indices = dataset()->indices_.flat<int64_t>();
      int64_t position;
      if (split_provider_) {
        Tensor split;
        TF_RETURN_IF_ERROR(split_provider_->GetNext(&split, end_of_sequence));
        if (*end_of_sequence) return absl::OkStatus();
        position = split.scalar<int64_t>()();
        if (position < 0 || position >= indices.size()) {
          return absl::InvalidArgumentError(
              absl::StrCat("split ", position, " is outside the ", indices.size(), " positions of BznaDataset"));
        }
      } else {
        *end_of_sequence = next_ >= indices.size();
        if (*end_of_sequence) return absl::OkStatus();
        // Advance first: after an error the next call moves on (ignore_errors()).
        position = next_++;
      }
      return dataset()->Produce(indices(position), out_tensors);
    }

   protected:
    std::shared_ptr<tensorflow::data::model::Node> CreateNode(IteratorContext*,
                                                        tensorflow::data::model::Node::Args args) const override {
      return tensorflow::data::model::MakeSourceNode(std::move(args));
    }

    absl::Status SaveInternal(SerializationContext*, IteratorStateWriter* writer) override {
      absl::MutexLock lock(&mu_);
      if (split_provider_) {
        TF_RETURN_IF_ERROR(
            split_provider_->Save([this](const std::string& key) { return full_name(key); }, writer));
      }
      return writer->WriteScalar(prefix(), kNextKey, next_);
    }

    absl::Status RestoreInternal(IteratorContext*, IteratorStateReader* reader) override {
      absl::MutexLock lock(&mu_);
      if (split_provider_) {
        TF_RETURN_IF_ERROR(
            split_provider_->Restore([this](const std::string& key) { return full_name(key); }, reader));
      }
      int64_t next = 0;
      TF_RETURN_IF_ERROR(reader->ReadScalar(prefix(), kNextKey, &next));
      const int64_t n = dataset()->indices_.NumElements();
      if (next < 0 || next > n) {
        return absl::DataLossError(
            absl::StrCat("restoring a BznaDataset iterator: saved position ", next, " is outside [0, ", n, "]"));
      }
      next_ = next;
      return absl::OkStatus();
    }

   private:
    absl::Mutex mu_;
    int64_t next_ ABSL_GUARDED_BY(mu_) = 0;  // used without a split provider
    std::shared_ptr<tensorflow::data::SplitProvider> split_provider_;
  };

  const std::vector<std::string> filenames_;
  const std::vector<std::shared_ptr<const OpenFile>> files_;
  const Tensor indices_;
  const std::string track_;
  const bool with_filename_;
  const std::vector<int64_t> identities_;  // the attribute, for AsGraphDefInternal
  const std::string working_directory_;    // likewise
  std::vector<int64_t> starts_;  // global index of each file's first sample
  DataTypeVector dtypes_;
  std::vector<PartialTensorShape> shapes_;
};

class BznaDatasetOp : public tensorflow::data::DatasetOpKernel {
 public:
  explicit BznaDatasetOp(tensorflow::OpKernelConstruction* ctx) : DatasetOpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kTrackAttr, &track_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kWithFilenameAttr, &with_filename_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kIdentitiesAttr, &identities_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kWorkingDirectoryAttr, &working_directory_));
  }

 protected:
  void MakeDataset(OpKernelContext* ctx, DatasetBase** output) override {
    std::vector<std::string> filenames;
    std::vector<std::shared_ptr<const OpenFile>> files;
    OP_REQUIRES_OK(ctx, OpenAll(ctx->input(0), identities_, working_directory_, &filenames, &files));
    const Tensor& indices = ctx->input(1);
    OP_REQUIRES(ctx, indices.dims() == 1,
                absl::InvalidArgumentError(absl::StrCat("expected indices as a vector. Received: shape ",
                                                        indices.shape().DebugString())));
    int64_t total = 0;
    for (const auto& f : files) total += f->index.num_samples();
    const auto flat = indices.flat<int64_t>();
    for (int64_t k = 0; k < flat.size(); ++k) {
      OP_REQUIRES(ctx, flat(k) >= 0 && flat(k) < total,
                  absl::InvalidArgumentError(absl::StrCat(
                      "indices[", k, "] = ", flat(k), " is out of range: ",
                      filenames.size() == 1 ? absl::StrCat(filenames[0], " holds ") : "the files hold ", total,
                      total == 1 ? " sample" : " samples")));
    }
    *output = new Dataset(ctx, std::move(filenames), std::move(files), indices, track_, with_filename_, identities_,
                          working_directory_);
  }

 private:
  std::string track_;
  bool with_filename_ = false;
  std::vector<int64_t> identities_;
  std::string working_directory_;
};

class BznaNumSamplesOp : public tensorflow::OpKernel {
 public:
  explicit BznaNumSamplesOp(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {}

  void Compute(OpKernelContext* ctx) override {
    std::vector<std::string> filenames;
    std::vector<std::shared_ptr<const OpenFile>> files;
    OP_REQUIRES_OK(ctx, OpenAll(ctx->input(0), {}, "", &filenames, &files));
    const int64_t n = static_cast<int64_t>(files.size());
    Tensor* samples = nullptr;
    Tensor* labelled = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {n}, &samples));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {n}, &labelled));
    for (int64_t k = 0; k < n; ++k) {
      samples->vec<int64_t>()(k) = files[k]->index.num_samples();
      labelled->vec<int64_t>()(k) = static_cast<int64_t>(files[k]->index.targets.size());
    }
  }
};

// ------------------------------------------------------------ BznaEpochSchedule

uint64_t Mix64(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Epoch `epoch`'s order of n positions: Fisher-Yates, swap partner of entry i
// drawn from Mix64 of (seed, epoch, i), scaled to [0, i] by a 128-bit multiply.
std::vector<int64_t> EpochOrder(int64_t seed, int64_t epoch, int64_t n) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  const uint64_t key = Mix64(Mix64(static_cast<uint64_t>(seed) + 0x9e3779b97f4a7c15ULL) ^
                             static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t r = Mix64(key + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ULL);
    const auto j = static_cast<int64_t>((static_cast<unsigned __int128>(r) * static_cast<uint64_t>(i + 1)) >> 64);
    std::swap(order[i], order[j]);
  }
  return order;
}

// An input's rank, checked in the kernel: an op's shape function runs only
// where a graph is built, and an eager call reaching scalar<>() with another
// shape would abort the process.
absl::Status RequireRank(const Tensor& t, int rank, const char* name) {
  if (t.dims() == rank) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("expected `", name, "` ", rank == 0 ? "as a scalar" : "as a vector",
                                                 ". Received shape ", t.shape().DebugString()));
}

class BznaEpochScheduleOp : public tensorflow::OpKernel {
 public:
  explicit BznaEpochScheduleOp(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shuffle", &shuffle_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shard_count", &count_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr("shard_index", &index_));
    OP_REQUIRES(ctx, index_ < count_,
                absl::InvalidArgumentError(absl::StrCat("shard_index ", index_, " is not below shard_count ", count_)));
  }

  void Compute(OpKernelContext* ctx) override {
    // The shape function checks these only where a graph is built, not for an eager call.
    OP_REQUIRES_OK(ctx, RequireRank(ctx->input(0), 1, "positions"));
    OP_REQUIRES_OK(ctx, RequireRank(ctx->input(1), 1, "selection"));
    OP_REQUIRES_OK(ctx, RequireRank(ctx->input(2), 0, "seed"));
    const auto positions = ctx->input(0).flat<int64_t>();
    const auto selection = ctx->input(1).flat<int64_t>();
    const int64_t seed = ctx->input(2).scalar<int64_t>()();
    const int64_t n = selection.size();
    const int64_t per_epoch = n > index_ ? (n - index_ + count_ - 1) / count_ : 0;
    const int64_t k = positions.size();
    OP_REQUIRES(ctx, per_epoch > 0 || k == 0,
                absl::InvalidArgumentError(absl::StrCat("shard ", index_, " of ", count_, " of a selection of ", n,
                                                        n == 1 ? " sample" : " samples", " is empty")));
    Tensor* indices = nullptr;
    Tensor* epochs = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {k}, &indices));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {k}, &epochs));
    auto out_i = indices->flat<int64_t>();
    auto out_e = epochs->flat<int64_t>();
    std::shared_ptr<const std::vector<int64_t>> order;
    int64_t order_epoch = -1;
    for (int64_t t = 0; t < k; ++t) {
      const int64_t p = positions(t);
      OP_REQUIRES(ctx, p >= 0, absl::InvalidArgumentError(absl::StrCat("position ", p, " is negative")));
      const int64_t epoch = p / per_epoch;
      int64_t entry = (p % per_epoch) * count_ + index_;
      if (shuffle_) {
        if (epoch != order_epoch) {
          order = Order(seed, epoch, n);
          order_epoch = epoch;
        }
        entry = (*order)[entry];
      }
      out_i(t) = selection(entry);
      out_e(t) = epoch;
    }
  }

 private:
  // The last few epochs' orders: a batch needs one (two across a boundary),
  // and parallel calls work on neighbouring epochs.
  std::shared_ptr<const std::vector<int64_t>> Order(int64_t seed, int64_t epoch, int64_t n) {
    const std::tuple<int64_t, int64_t, int64_t> key(seed, epoch, n);
    {
      absl::MutexLock lock(&mu_);
      for (const auto& [k, v] : cache_) {
        if (k == key) return v;
      }
    }
    auto order = std::make_shared<const std::vector<int64_t>>(EpochOrder(seed, epoch, n));
    absl::MutexLock lock(&mu_);
    cache_.emplace_back(key, order);
    if (cache_.size() > kCached) cache_.erase(cache_.begin());
    return order;
  }

  static constexpr size_t kCached = 4;
  bool shuffle_ = false;
  int64_t count_ = 1;
  int64_t index_ = 0;
  absl::Mutex mu_;
  std::vector<std::pair<std::tuple<int64_t, int64_t, int64_t>, std::shared_ptr<const std::vector<int64_t>>>> cache_
      ABSL_GUARDED_BY(mu_);
};

// ------------------------------------------------------------ BznaReadSamples

class BznaReadSamplesOp : public tensorflow::OpKernel {
 public:
  explicit BznaReadSamplesOp(tensorflow::OpKernelConstruction* ctx) : OpKernel(ctx) {
    std::string track;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kTrackAttr, &track));
    track_ = track == "input" ? PictureTrack::kInput : PictureTrack::kThumb;
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kWithFilenameAttr, &with_filename_));
    std::string on_error;
    OP_REQUIRES_OK(ctx, ctx->GetAttr("on_error", &on_error));
    skip_ = on_error == "skip";
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kIdentitiesAttr, &identities_));
    OP_REQUIRES_OK(ctx, ctx->GetAttr(kWorkingDirectoryAttr, &working_directory_));
  }

  // With on_error = "skip", a sample that cannot be read (a malformed or
  // damaged sample, a short or failed read) is reported in `errors` instead of
  // failing the batch; running out of memory or descriptors, cancellation, and
  // a file that is gone or changed since it was opened (TfFile, UnlessChanged)
  // still fail it.
  bool Skippable(const absl::Status& s) const {
    return skip_ && s.code() != absl::StatusCode::kResourceExhausted && s.code() != absl::StatusCode::kCancelled &&
           s.code() != absl::StatusCode::kFailedPrecondition;
  }

  void Compute(OpKernelContext* ctx) override {
    std::vector<std::shared_ptr<const OpenFile>> files;
    std::vector<int64_t> starts;
    OP_REQUIRES_OK(ctx, RequireRank(ctx->input(1), 1, "indices"));  // (not checked for an eager call)
    const auto indices = ctx->input(1).flat<int64_t>();
    OP_REQUIRES_OK(ctx, Files(ctx->input(0), indices, &files, &starts));
    const int64_t total = starts.back();
    const int64_t k = indices.size();
    Tensor *data = nullptr, *names = nullptr, *height = nullptr, *target = nullptr, *width = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, {k}, &data));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, {with_filename_ ? k : 0}, &names));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(2, {k}, &height));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(3, {k}, &target));
    OP_REQUIRES_OK(ctx, ctx->allocate_output(4, {k}, &width));
    Tensor* errors = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(5, {k}, &errors));
    for (int64_t t = 0; t < k; ++t) {
      const int64_t global = indices(t);
      OP_REQUIRES(ctx, global >= 0 && global < total,
                  absl::InvalidArgumentError(absl::StrCat(
                      "sample index ", global, " is out of range: ",
                      files.size() == 1 ? absl::StrCat(files[0]->file->name(), " holds ") : "the files hold ",
                      total, total == 1 ? " sample" : " samples")));
      const size_t f = std::upper_bound(starts.begin(), starts.end(), global) - starts.begin() - 1;
      const int64_t local = global - starts[f];
      const OpenFile& file = *files[f];
      Picture pic;
      std::string name;
      absl::Status s = ReadPicture(*file.file, file.index, local, track_, &pic);
      if (s.ok() && with_filename_) s = ReadFilename(*file.file, file.index, local, &name);
      if (!s.ok()) {
        s = UnlessChanged(file, Named(file.file->name(), local, s));
        OP_REQUIRES(ctx, Skippable(s), s);
        // Skipped: no picture, sizes 0, the reason in errors.
        errors->flat<tstring>()(t) = tstring(std::string(s.message()));
        target->flat<int64_t>()(t) = static_cast<int64_t>(file.index.target(local));
        height->flat<int32_t>()(t) = 0;
        width->flat<int32_t>()(t) = 0;
        continue;
      }
      data->flat<tstring>()(t) = tstring(std::move(pic.annexb));
      if (with_filename_) names->flat<tstring>()(t) = tstring(std::move(name));
      height->flat<int32_t>()(t) = static_cast<int32_t>(pic.height);
      target->flat<int64_t>()(t) = static_cast<int64_t>(file.index.target(local));
      width->flat<int32_t>()(t) = static_cast<int32_t>(pic.width);
    }
  }

 private:
  // The open files for `names` (kept while this kernel lives; reopened when
  // the list changes, or when a file that `indices` read is no longer the one
  // at its path), and each file's first global index plus the total.
  absl::Status Files(const Tensor& names, tensorflow::TTypes<int64_t>::ConstFlat indices,
                     std::vector<std::shared_ptr<const OpenFile>>* files, std::vector<int64_t>* starts) {
    absl::MutexLock lock(&mu_);
    std::vector<std::string> wanted;
    if (names.dims() <= 1) {
      for (int64_t i = 0; i < names.NumElements(); ++i) wanted.emplace_back(names.flat<tstring>()(i));
    }
    if (files_.empty() || wanted != names_ || Replaced(indices)) {
      std::vector<std::string> opened;
      std::vector<std::shared_ptr<const OpenFile>> fresh;
      TF_RETURN_IF_ERROR(OpenAll(names, identities_, working_directory_, &opened, &fresh));
      names_ = std::move(opened);
      files_ = std::move(fresh);
      starts_.assign(1, 0);
      for (const auto& f : files_) starts_.push_back(starts_.back() + f->index.num_samples());
    }
    *files = files_;
    *starts = starts_;
    return absl::OkStatus();
  }

  // Whether a file that `indices` read is not the one opened any more: another
  // file at its path (renamed over it, as a conversion or `mv` does: the
  // handle kept would read the old one). Eager TensorFlow keeps this kernel
  // for every later call with the same attributes, so a call reads the files
  // at their paths when it runs, as a new op would: opened again, their
  // identities checked again. A file changed in place (the same inode) is
  // read through its handle, and a sample that then fails says the file
  // changed (UnlessChanged). A stat for each file the call reads (usually one
  // or two).
  bool Replaced(tensorflow::TTypes<int64_t>::ConstFlat indices) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    int64_t checked = -1;
    for (int64_t t = 0; t < indices.size(); ++t) {
      const int64_t global = indices(t);
      if (global < 0 || global >= starts_.back()) continue;  // refused later, with its message
      const int64_t f = std::upper_bound(starts_.begin(), starts_.end(), global) - starts_.begin() - 1;
      if (f == checked) continue;
      checked = f;
      FileStat now;
      if (!StatFile(files_[f]->file->path(), &now).ok()) continue;  // gone: read through the handle
      const FileStat& then = files_[f]->file->stat();
      if (now.device != then.device || now.inode != then.inode) return true;
    }
    return false;
  }

  PictureTrack track_ = PictureTrack::kThumb;
  bool with_filename_ = false;
  bool skip_ = false;
  std::vector<int64_t> identities_;
  std::string working_directory_;
  absl::Mutex mu_;
  std::vector<std::string> names_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<const OpenFile>> files_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> starts_ ABSL_GUARDED_BY(mu_);  // file k's first global index; then the total
};

REGISTER_KERNEL_BUILDER(Name("BznaDataset").Device(tensorflow::DEVICE_CPU), BznaDatasetOp);
REGISTER_KERNEL_BUILDER(Name("BznaEpochSchedule").Device(tensorflow::DEVICE_CPU), BznaEpochScheduleOp);
REGISTER_KERNEL_BUILDER(Name("BznaReadSamples").Device(tensorflow::DEVICE_CPU), BznaReadSamplesOp);
REGISTER_KERNEL_BUILDER(Name("BznaNumSamples").Device(tensorflow::DEVICE_CPU), BznaNumSamplesOp);

}  // namespace
}  // namespace bzna_dataset_kernels
}  // namespace bzna_tf
