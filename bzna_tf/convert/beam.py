"""Conversion with Apache Beam: the shards of one plan spread over the workers of any Beam runner.

Needs the ``beam`` extra (``pip install 'bzna-tf[beam]'``); nothing else in
``bzna_tf`` imports Apache Beam. The pipeline is the converter's plan
(:func:`bzna_tf.convert.plan_shards`) run one shard per element:
``Create(shard numbers) -> Reshuffle -> ParDo(convert one shard)``. Each
element calls :func:`bzna_tf.convert.convert` with ``shards=[k]``, so a shard
is written exactly as a local ``convert(source, output, num_shards=N)`` writes
it: under its ``.NAME.partial`` name, renamed when complete, with the same
bytes as a local conversion with the same options (one x265 thread per picture
whatever ``workers`` is, so the bytes never depend on it). A retried or rerun element finds
its shard finished and verified and skips it, so the pipeline can simply be run
again after a failure, and shards can be mixed with ones converted locally or
by an array job of the same plan.

Locally (the DirectRunner, the default)::

    from bzna_tf.convert import ImageFolderSource
    from bzna_tf.convert.beam import run

    summary = run(ImageFolderSource("/data/imagenet/train"), "/data/bzna/train.bzna", num_shards=1024,
                  pipeline_options=["--direct_num_workers=0", "--direct_running_mode=multi_processing"])
    print(summary)

On a cluster, pass the runner's flags; every worker must read the source files
and write the output folder under the same paths as the machine that starts
the pipeline (a shared filesystem: NFS, Lustre, a FUSE mount of a bucket), and
every worker needs ``bzna-tf`` installed (e.g. ``--requirements_file``, a
container image, or ``--setup_file``)::

    --runner=DataflowRunner --project=P --region=R --temp_location=gs://B/tmp
    --runner=FlinkRunner --flink_master=HOST:8081 --environment_type=PROCESS ...
    --runner=SparkRunner --spark_master_url=spark://HOST:7077 ...

The source object travels inside the pipeline (pickled). A folder of a million
images is a list of a million paths (tens of MB, more than Dataflow accepts in a
job graph): pass a function that makes the source instead, e.g.
``functools.partial(ImageFolderSource, "/data/imagenet/train")``; it runs once
here (for the image count) and once per worker. TFRecord sources are small
(their record counts, counted here, travel with them): pass them as they are.
"""

from __future__ import annotations

import logging
import os
import pickle
import time
import uuid

try:
    import apache_beam as beam
    from apache_beam.metrics import Metrics
    from apache_beam.options.pipeline_options import PipelineOptions
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "bzna_tf.convert.beam needs Apache Beam, an optional extra: pip install 'bzna-tf[beam]' "
        f"(import failed: {e})"
    ) from e

from bzna_tf.convert.converter import ConversionError, ConversionSummary, convert
from bzna_tf.convert.plan import plan_shards

__all__ = ["ConvertShards", "merge_summaries", "run"]

_NAMESPACE = "bzna_tf"
# Chosen by the pipeline, one shard per element; the rest of convert()'s arguments pass through.
_RESERVED = ("shards", "worker_index", "num_workers", "num_shards", "shard_size", "progress", "log")

logger = logging.getLogger(__name__)


def _make_source(source):
    """The source itself, or what a zero-argument factory makes."""
    if callable(source) and not hasattr(source, "__len__"):
        return source()
    return source


class _Log:
    """A file-like ``log`` for convert() that sends its lines (skipped images) to ``logging``."""

    def __init__(self):
        self._buffer = ""

    def write(self, text):
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            if line:
                logger.warning("%s", line)

    def flush(self):
        pass


class _ConvertShard(beam.DoFn):
    """Converts the shard numbers it receives; emits one :class:`ConversionSummary` each."""

    def __init__(self, source, output, num_shards, convert_kwargs):
        super().__init__()
        self._source_arg = source
        self._output = output
        self._num_shards = num_shards
        self._kwargs = convert_kwargs
        self._images = Metrics.counter(_NAMESPACE, "images")
        self._bytes = Metrics.counter(_NAMESPACE, "bytes")
        self._skipped = Metrics.counter(_NAMESPACE, "skipped_images")
        self._written = Metrics.counter(_NAMESPACE, "shards_written")
        self._finished = Metrics.counter(_NAMESPACE, "shards_already_finished")
        self._source = None

    def setup(self):
        self._source = _make_source(self._source_arg)

    def process(self, index):
        if self._source is None:  # runners call setup() first; this is for direct process() calls
            self.setup()
        summary = convert(
            self._source,
            self._output,
            num_shards=self._num_shards,
            shards=[index],
            progress=False,
            log=_Log(),
            **self._kwargs,
        )
        self._images.inc(summary.images)
        self._bytes.inc(summary.bytes)
        self._skipped.inc(len(summary.skipped))
        self._written.inc(len(summary.written))
        self._finished.inc(len(summary.finished))
        yield summary


class ConvertShards(beam.PTransform):
    """Converts ``source`` into ``num_shards`` shards named after ``output``, one Beam element per shard.

    Applied to a pipeline (``pipeline | ConvertShards(...)``), it gives a
    PCollection of the per-shard :class:`~bzna_tf.convert.ConversionSummary`
    objects (in no particular order; :func:`merge_summaries` combines them).

    Args:
      source: a conversion source (:class:`~bzna_tf.convert.TFRecordSource`,
        :class:`~bzna_tf.convert.ImageFolderSource`, :class:`~bzna_tf.convert.WebDatasetSource`,
        :class:`~bzna_tf.convert.ParquetSource`, ...: picklable, readable under the same paths on
        every worker), or a zero-argument function that makes one on each worker (see the module's notes).
      output: ``DIR/NAME.bzna``; the shards are ``DIR/NAME-00000-of-0000N.bzna`` ... (DIR shared by
        every worker).
      num_shards: how many shards (1 .. the number of images); they are the units of work.
      **convert_kwargs: the other arguments of :func:`bzna_tf.convert.convert` (``encoding``,
        ``order``, ``seed``, ``overwrite``, ``missing_label``, ...). ``workers`` defaults to 0
        (encode in the Beam worker's process; Beam runs one element per core).

    Raises:
      ValueError: a source without ``len()``, a bad ``num_shards`` or ``output``, or an argument the
        pipeline sets itself (``shards``, ``worker_index``, ``num_workers``, ``shard_size``,
        ``progress``, ``log``).
    """

    def __init__(self, source, output, num_shards, **convert_kwargs):
        super().__init__()
        reserved = sorted(set(convert_kwargs) & set(_RESERVED))
        if reserved:
            raise ValueError(
                f"Expected no {', '.join(map(repr, reserved))}: the Beam pipeline converts one shard of the "
                "plan per element and sets them itself (give the plan as num_shards)"
            )
        convert_kwargs.setdefault("workers", 0)
        made = _make_source(source)
        try:
            total = len(made)
        except TypeError:
            raise ValueError(
                "Expected a source with len() (TFRecordSource, ImageFolderSource, GulpSource) or a function "
                f"that makes one. Received: {type(made).__name__}"
            ) from None
        self.plan = plan_shards(total, output, num_shards)  # validates num_shards and output here
        if made is source and hasattr(made, "describe"):
            made.describe()  # the fingerprint's facts, computed once here and pickled with the source
        self.source = made if made is source else source
        self.output = os.fspath(output)
        self.num_shards = num_shards
        self.convert_kwargs = convert_kwargs

    def expand(self, pbegin):
        return (
            pbegin
            | "ShardNumbers" >> beam.Create([spec.index for spec in self.plan])
            | "Spread" >> beam.Reshuffle()
            | "Convert"
            >> beam.ParDo(_ConvertShard(self.source, self.output, self.num_shards, self.convert_kwargs))
        )


def _shard_path(summary):
    if summary.written:
        return summary.written[0]
    if summary.finished:
        return summary.finished[0][0]
    return ""


def merge_summaries(summaries, output=None) -> ConversionSummary:
    """One :class:`~bzna_tf.convert.ConversionSummary` from per-shard ones, as a local conversion reports.

    Files, skipped images and class names are taken in shard order; ``seconds``
    is the sum of the shards' times (:func:`run` reports the wall time instead).
    Raises :class:`~bzna_tf.convert.ConversionError` where two shards name one
    class differently (each shard checks only its own records).
    """
    parts = sorted(summaries, key=_shard_path)
    if not parts:
        return ConversionSummary(output=os.fspath(output) if output is not None else "")
    merged = ConversionSummary(
        output=os.fspath(output) if output is not None else parts[0].output,
        num_shards=parts[0].num_shards,
        order=parts[0].order,  # one plan: every shard has its order, seed and source notes
        seed=parts[0].seed,
        notes=list(parts[0].notes),
        exif_transpose=parts[0].exif_transpose,
        alpha_background=parts[0].alpha_background,
    )
    names = None
    for part in parts:
        merged.images += part.images
        merged.labelled += part.labelled
        for why, (k, first) in part.unlabelled.items():
            merged.unlabelled.setdefault(why, [0, first])[0] += k
        for fact, (k, first) in part.pictures.items():
            merged.pictures.setdefault(fact, [0, first])[0] += k
        merged.skipped += part.skipped
        merged.seconds += part.seconds
        merged.bytes += part.bytes
        merged.written += part.written
        merged.finished += part.finished
        if part.targets is not None:
            low, high = part.targets
            if merged.targets is not None:
                low, high = min(low, merged.targets[0]), max(high, merged.targets[1])
            merged.targets = (low, high)
        if part.class_names:
            names = names or []
            names.extend([None] * (len(part.class_names) - len(names)))
            for target, name in enumerate(part.class_names):
                if names[target] is None:
                    names[target] = (name, _shard_path(part)) if name is not None else None
                elif name is not None and name != names[target][0]:
                    first, where = names[target]
                    raise ConversionError(
                        f"{_shard_path(part)} names class {target} {name!r}, but {where} names it {first!r}: "
                        "the shards' records disagree on the class's name, and readers refuse the set. "
                        "Convert again giving the names with --class-names FILE (class_names=; one per line, "
                        "by target) and --class-text-key '' (class_text_key=None)"
                    )
    merged.class_names = None if names is None else [n[0] if n is not None else None for n in names]
    return merged


def _write_report(summaries, path):
    """Writes the pipeline's summaries (pickled) where the launching process reads them back."""
    tmp = f"{path}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "wb") as f:
        pickle.dump(list(summaries), f)
    os.replace(tmp, path)


def run(source, output, num_shards, *, pipeline_options=None, **convert_kwargs) -> ConversionSummary | None:
    """Runs :class:`ConvertShards` in a pipeline of its own, waits for it, and summarises.

    Args:
      source, output, num_shards, **convert_kwargs: as for :class:`ConvertShards`.
      pipeline_options: a ``PipelineOptions``, or a list of flags (``["--runner=DataflowRunner", ...]``);
        default the DirectRunner with Beam's defaults.

    Returns:
      The merged :class:`~bzna_tf.convert.ConversionSummary` (``seconds``: the pipeline's wall time),
      or None when this process cannot read it back (the workers write it, pickled, beside the shards:
      the output folder is not shared with this machine).
    """
    if pipeline_options is None:
        pipeline_options = PipelineOptions([])
    elif not isinstance(pipeline_options, PipelineOptions):
        if isinstance(pipeline_options, str):
            raise TypeError(f"Expected `pipeline_options` as a list of flags. Received: {pipeline_options!r}")
        pipeline_options = PipelineOptions(list(pipeline_options))
    transform = ConvertShards(source, output, num_shards, **convert_kwargs)
    folder, base = os.path.split(transform.output)
    report = os.path.join(folder, f".{base}.beam-{uuid.uuid4().hex[:12]}.summaries")
    start = time.perf_counter()
    with beam.Pipeline(options=pipeline_options) as pipeline:
        _ = (
            pipeline
            | "ConvertShards" >> transform
            | "Collect" >> beam.combiners.ToList()
            | "Report" >> beam.Map(_write_report, report)
        )
    seconds = time.perf_counter() - start
    try:
        with open(report, "rb") as f:
            summaries = pickle.load(f)
        os.remove(report)
    except FileNotFoundError:
        logger.warning("the pipeline ran, but its summary %s is not visible here (yet)", report)
        return None
    merged = merge_summaries(summaries, transform.output)
    merged.seconds = seconds
    return merged
