"""Making .bzna files: H.265 encoding (libx265 through PyAV) and, later, converters."""

from bzna_tf.convert.encode import coded_size_for, encode_image, encode_picture, thumbnail_size

__all__ = ["coded_size_for", "encode_image", "encode_picture", "thumbnail_size"]
