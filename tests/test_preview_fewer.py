"""A preview of more samples than the dataset has says so (Python: a PreviewWarning; the CLI: one line)."""

import warnings

import pytest

import bzna_tf
from bzna_tf import ClassificationDataset
from bzna_tf.cli import main as cli
from bzna_tf.previews import PreviewWarning

pytest.importorskip("tensorflow")


def test_asking_for_more_samples_than_there_are_warns(flat_shards):
    d = ClassificationDataset(flat_shards[0]).select([0, 1])
    with pytest.warns(PreviewWarning) as caught:
        p = bzna_tf.preview(d, 16, shape=8)
    assert len(p.indices) == 2 and len(caught) == 1
    assert str(caught[0].message) == (
        f"asked for 16 samples, but the dataset ({flat_shards[0]}) has 2 samples: the preview shows all 2"
    )
    with pytest.warns(
        PreviewWarning, match=r"asked for 2 samples, but .* has 1 sample: the preview shows it$"
    ):
        bzna_tf.preview(d.select([1]), 2, shape=8)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", PreviewWarning)
        assert len(bzna_tf.preview(d, 2, shape=8).indices) == 2
    assert not [w for w in seen if issubclass(w.category, PreviewWarning)]  # as many as there are: none


def test_the_cli_says_so_in_one_line(flat_shards, tmp_path, capsys):
    out = tmp_path / "grid.png"
    args = ["preview", flat_shards[0], "-o", str(out), "--size", "8", "--split", "[:1]"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", PreviewWarning)  # the CLI turns it into its line, not a warning
        assert cli([*args, "--n", "16"]) == 0
    captured = capsys.readouterr()
    assert captured.err == (
        f"bzna-tf preview: asked for 16 samples, but the dataset ({flat_shards[0]}, split '[:1]') has 1 "
        "sample: "
        "the preview shows it\n"
    )
    assert captured.out.startswith(f"{out}: ") and ", 1 sample (0)" in captured.out
    assert cli([*args, "--n", "1"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and ", 1 sample (0)" in captured.out
