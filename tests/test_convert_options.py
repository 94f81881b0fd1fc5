"""Encoder options are checked before any work, in one EncodeOptions object (convert(encoding=...)).

The walkthrough's case: ``--preset superslow`` ran until x265 said
``avcodec_open2(...) returned 22``.
"""

import math

import numpy as np
import pytest
from test_convert_shards import make_folder

from bzna_tf.cli import main
from bzna_tf.convert import convert, encode_picture


def test_a_bad_preset_is_refused_by_the_command_line_listing_the_valid_ones(tmp_path, capsys):
    src = make_folder(tmp_path / "src", {"a": 1}, size=(8, 8))
    out = tmp_path / "new" / "x.bzna"
    with pytest.raises(SystemExit) as e:
        main(["convert", "folder", str(src), str(out), "--preset", "superslow", "--no-progress"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert (
        "invalid choice: 'superslow'" in err
        and "'ultrafast', 'superfast', 'veryfast'" in err
        and "placebo" in err
    )
    assert not (tmp_path / "new").exists()  # nothing was made


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["--crf", "60"], "Expected `crf` as a number in [0, 51]. Received: crf=60.0"),
        (["--crf", "nan"], "Expected `crf` as a number in [0, 51]. Received: crf=nan"),
        (["--encoder", "nvenc", "--preset", "fast"], "Expected no `preset` or `chroma` with encoder='nvenc'"),
        (["--seed", "-1"], "Expected `seed` as an integer in [0, 2**64). Received: seed=-1"),
        (["--processes", "-2"], "Expected --processes >= 0. Received: --processes -2"),
        (["--num-shards", "0"], "Expected --num-shards >= 1. Received: --num-shards 0"),
    ],
)
def test_encoder_options_are_checked_before_the_source_is_read(tmp_path, capsys, flags, fragment):
    missing = tmp_path / "no-such-folder"  # reading the source would fail with another message
    assert main(["convert", "folder", str(missing), str(tmp_path / "x.bzna"), *flags]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bzna-tf convert: ") and fragment in err and "no-such-folder" not in err


def test_encode_options_are_checked_at_construction():
    from bzna_tf.convert import X265_PRESETS, EncodeOptions

    assert EncodeOptions().settings["preset"] == "superfast"  # the default quality, training
    quick = EncodeOptions(quality="quick", crf=20)
    assert (quick.settings["preset"], quick.settings["crf"], quick.settings["chroma"]) == (
        "ultrafast",
        20,
        "lsq",
    )
    assert quick.settings["x265_params"] == "psy-rd=0:psy-rdoq=0"  # the quality's, whatever the CRF
    assert quick.crf == 20 and quick.preset is None  # what was given; settings fills in the quality's
    for kwargs, fragment in [
        ({"preset": "superslow"}, r"Expected `preset` in \('ultrafast', 'superfast'"),
        ({"crf": 52}, r"Expected `crf` as a number in \[0, 51\]. Received: crf=52"),
        ({"crf": math.nan}, r"Received: crf=nan"),
        ({"crf": "10"}, r"Received: crf='10'"),
        ({"crf": True}, r"Received: crf=True"),
        ({"chroma": "median"}, r"Expected `chroma` in \('average', 'lsq'\)"),
        ({"layout": "tiny"}, r"Expected `layout` in \('benzina', 'compact'\)"),
        ({"quality": "best"}, r"Expected `quality` in \('archival', 'training', 'quick'\)"),
        ({"encoder": "vp9"}, r"Expected `encoder` in \('x265', 'nvenc'\)"),
        ({"encoder": "nvenc", "chroma": "lsq"}, "Expected no `preset` or `chroma` with encoder='nvenc'"),
        ({"thumbnails_only": 1}, "Expected `thumbnails_only` as True or False"),
        ({"lenient": "yes"}, "Expected `lenient` as True or False"),
    ]:
        with pytest.raises(ValueError, match=fragment):
            EncodeOptions(**kwargs)
    assert len(X265_PRESETS) == 10


def test_convert_takes_its_encoder_options_as_one_object(tmp_path):
    items = [__import__("bzna_tf").convert.Item("a.ppm", 0, data=b"P6\n2 2\n255\n" + bytes(12))]
    with pytest.raises(TypeError, match=r"Expected `encoding` as a bzna_tf.convert.EncodeOptions"):
        convert(items, tmp_path / "x.bzna", encoding={"preset": "fast"}, progress=False)
    with pytest.raises(TypeError, match="unexpected keyword argument 'preset'"):
        convert(items, tmp_path / "x.bzna", preset="fast", progress=False)
    assert not (tmp_path / "x.bzna").exists()


def test_encode_picture_refuses_a_bad_preset_before_x265_does():
    with pytest.raises(
        ValueError, match=r"Expected `preset` in \('ultrafast'.*'placebo'\). Received: preset='superslow'"
    ):
        encode_picture(np.zeros((16, 16, 3), np.uint8), preset="superslow")
    with pytest.raises(ValueError, match=r"Expected `crf` as a number in \[0, 51\]"):
        encode_picture(np.zeros((16, 16, 3), np.uint8), crf=-1)


def test_a_deprecated_quality_converts_with_its_old_settings_and_says_what_replaces_it(tmp_path, capsys):
    src = make_folder(tmp_path / "src", {"a": 1}, size=(8, 8))
    out = tmp_path / "x.bzna"
    flags = ["--quality", "fast", "--workers", "0", "--no-progress"]
    assert main(["convert", "folder", str(src), str(out), *flags]) == 0
    err = capsys.readouterr().err
    assert err.count("bzna-tf convert: warning: quality 'fast' is deprecated") == 1
    assert "quality='quick'" in err and "--quality archival --preset ultrafast --crf 14 --chroma lsq" in err
    assert "FutureWarning" not in err  # said as the command's own line
    from bzna_tf.format import BznaFile

    with BznaFile(out) as f:  # the old settings (x265's options SEI says them), not the new quality's
        options = f.sample(0).input.hvcc.to_bytes()
    assert b" crf=14.0 " in options and b" psy-rd=2.00 " in options
    with pytest.raises(SystemExit):
        main(["convert", "folder", str(src), str(out), "--quality", "best"])
    assert "invalid choice: 'best'" in capsys.readouterr().err
