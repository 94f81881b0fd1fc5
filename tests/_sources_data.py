"""Small datasets in the layouts the conversion sources read: WebDataset shards, Parquet files, TFDS folders.

Used by the source tests and by tests/_convert_job.py (a conversion killed in a subprocess).
"""

import io
import json
import tarfile

import numpy as np


def gradient(h, w, seed=0):
    """A smooth test image (the same as conftest's: x265 compresses it well)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    a, b, c = rng.uniform(0.2, 1.0, 3)
    img = np.stack([xx * 255 * a / w, yy * 255 * b / h, (xx + yy) * 255 * c / (w + h)], -1)
    return img.astype(np.uint8)


def ppm(rgb):
    h, w = rgb.shape[:2]
    return b"P6\n%d %d\n255\n" % (w, h) + np.ascontiguousarray(rgb).tobytes()


def png(rgb):
    from PIL import Image

    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG")
    return out.getvalue()


def images(n, size=(24, 32), encode=ppm):
    """``n`` distinct small encoded images."""
    return [encode(gradient(*size, seed=i)) for i in range(n)]


def add_member(tf, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    tf.addfile(info, io.BytesIO(data))


def write_shards(folder, samples, per_shard, stem="train"):
    """WebDataset shards ``stem-000000.tar`` ...: ``samples`` is [{extension: bytes}], keyed 00000, ..."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for s in range(0, len(samples), per_shard):
        path = folder / f"{stem}-{s // per_shard:06d}.tar"
        with tarfile.open(path, "w", format=tarfile.USTAR_FORMAT) as tf:
            for i in range(s, min(s + per_shard, len(samples))):
                for ext, data in samples[i].items():
                    add_member(tf, f"{i:05d}.{ext}", data)
        paths.append(path)
    return paths


def wds_samples(n, classes=3, size=(24, 32)):
    """[{ppm, cls}] with labels i % classes."""
    return [{"ppm": im, "cls": str(i % classes).encode()} for i, im in enumerate(images(n, size))]


HF_FEATURES = {
    "image": {"_type": "Image"},
    "label": {"names": ["ant", "bee", "cat"], "_type": "ClassLabel"},
}


def write_parquet(path, pictures, labels, row_group_size, hf_names=None, paths=None, extra=None):
    """A Parquet file in the Hugging Face ``datasets`` layout: image {bytes, path} structs and int labels.

    ``hf_names``: class names stored as a ClassLabel in the schema's ``huggingface`` metadata (None: none).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = paths if paths is not None else [f"img_{i:05d}.ppm" for i in range(len(pictures))]
    image = pa.array(
        [
            None if b is None and p is None else {"bytes": b, "path": p}
            for b, p in zip(pictures, paths, strict=True)
        ],
        pa.struct([("bytes", pa.binary()), ("path", pa.string())]),
    )
    columns = {"image": image, "label": pa.array(labels, pa.int64())}
    columns.update(extra or {})
    table = pa.table(columns)
    if hf_names is not None:
        features = {"image": {"_type": "Image"}, "label": {"names": list(hf_names), "_type": "ClassLabel"}}
        meta = {b"huggingface": json.dumps({"info": {"features": features}}).encode()}
        table = table.replace_schema_metadata(meta)
    pq.write_table(table, path, row_group_size=row_group_size)
    return path


def pictures_by_name(paths):
    """{stored file name: (sample bytes, target or None)} of .bzna files (a dict: names must be unique)."""
    from bzna_tf.format import BznaFile

    out = {}
    for path in paths:
        with BznaFile(path) as f:
            for i in range(len(f)):
                name = f.filename(i)
                assert name not in out, f"{name} twice"
                out[name] = (f.sample_bytes(i), f.target(i) if i < f.num_labelled else None)
    return out


def reference(tmp_path, items, **options):
    """What converting ``items`` (a list of Item) gives, by name: what a source's conversion must hold."""
    from bzna_tf.convert import convert

    path = tmp_path / "reference.bzna"
    convert(items, path, **{"workers": 0, "progress": False, **options, "order": "source", "overwrite": True})
    return pictures_by_name([path])
