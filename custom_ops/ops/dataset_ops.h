// Attribute names of the .bzna source ops, shared by registration and kernels.

#ifndef BZNA_TF_OPS_DATASET_OPS_H_
#define BZNA_TF_OPS_DATASET_OPS_H_

namespace bzna_tf {

constexpr char kTrackAttr[] = "track";
constexpr char kWithFilenameAttr[] = "with_filename";

}  // namespace bzna_tf

#endif  // BZNA_TF_OPS_DATASET_OPS_H_
