// Attribute names of the .bzna source ops, shared by registration and kernels.

#ifndef BZNA_TF_OPS_DATASET_OPS_H_
#define BZNA_TF_OPS_DATASET_OPS_H_

namespace bzna_tf {

constexpr char kTrackAttr[] = "track";
constexpr char kWithFilenameAttr[] = "with_filename";
// Five int64 per file (size, modification time in ns, and the moov, targets
// and names checksums of its checksum table, -1 without one): the files the
// caller's index was read from. Empty: no check.
constexpr char kIdentitiesAttr[] = "identities";
// The working directory when the dataset was made: relative local filenames
// are opened from it (errors still name them as given). Empty: from the
// process's working directory at each open.
constexpr char kWorkingDirectoryAttr[] = "working_directory";

}  // namespace bzna_tf

#endif  // BZNA_TF_OPS_DATASET_OPS_H_
