"""Progress: a redrawn bar on a terminal, plain periodic lines in a log, or nothing (issue 39 item 3).

``progress=`` / ``--progress {auto,bar,lines,none}`` for ``convert`` and ``verify``; the lines come at
least once a minute and at each further 10% (no closer than 5 s apart), so that a short run in a log
says how it goes without flooding it.
"""

from __future__ import annotations

import io
import re

import pytest
from conftest import gradient
from test_convert import jpeg

from bzna_tf.cli import main
from bzna_tf.convert import Item, convert
from bzna_tf.format import progress as progress_module
from bzna_tf.format.progress import PlainProgress, progress_mode
from bzna_tf.verify import verify


class Terminal(io.StringIO):
    def isatty(self):
        return True


def _items(n):
    return [Item(f"{i}.jpg", i % 2, data=jpeg(gradient(24, 32, seed=i))) for i in range(n)]


def _run(monkeypatch, total, times, unit="images"):
    """The lines of a PlainProgress whose update k comes at times[k] seconds."""
    clock = iter([0.0, *times])
    monkeypatch.setattr(progress_module.time, "monotonic", lambda: next(clock))
    log = io.StringIO()
    bar = PlainProgress(total, log, unit=unit)
    for _ in times:
        bar.update(1)
    return log.getvalue().splitlines()


def test_lines_at_each_10_percent_when_5_seconds_apart(monkeypatch):
    lines = _run(monkeypatch, 100, [0.5 * (k + 1) for k in range(100)])  # 50 s in all
    line = r"(\d+) of 100 images \(\d+%\) in 0:00:\d\d, 2\.0 images/s"
    counts = [int(re.match(line, ln)[1]) for ln in lines]
    assert counts == [10, 20, 30, 40, 50, 60, 70, 80, 90, 100], lines


def test_a_slow_run_gets_a_line_a_minute(monkeypatch):
    lines = _run(monkeypatch, 1000, [10.0 * (k + 1) for k in range(30)], unit="samples")  # 300 s, 3%
    counts = (6, 12, 18, 24, 30)  # one a minute
    assert [ln.split(" in ")[0] for ln in lines] == [f"{k} of 1,000 samples ({k // 10}%)" for k in counts]
    assert lines[0] == "6 of 1,000 samples (0%) in 0:01:00, 0.1 samples/s, 2:45:40 left"


def test_a_short_run_prints_no_line(monkeypatch):
    assert _run(monkeypatch, 100, [0.04 * (k + 1) for k in range(100)]) == []  # 4 s


def test_the_counts_after_the_rate(monkeypatch):
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)
    log = io.StringIO()
    bar = PlainProgress(None, log, unit="samples")
    bar.set_postfix(skipped=2, refresh=False)
    bar.update(3)
    bar.set_postfix_str("1 damaged")
    bar.update(1)
    bar.set_postfix(skipped=0)
    bar.update(1)
    first, second, third = log.getvalue().splitlines()
    assert re.fullmatch(r"3 samples in 0:00:00, \d+\.\d samples/s, 2 skipped", first)
    assert second.endswith("samples/s, 1 damaged") and third.endswith("samples/s")


@pytest.mark.parametrize(
    ("progress", "terminal", "mode"),
    [
        (True, True, "bar"),
        (True, False, "lines"),
        ("auto", True, "bar"),
        ("auto", False, "lines"),
        ("bar", False, "bar"),
        ("lines", True, "lines"),
        ("none", True, "none"),
        (False, True, "none"),
        (None, True, "none"),
    ],
)
def test_modes(progress, terminal, mode):
    assert progress_mode(progress, Terminal() if terminal else io.StringIO()) == mode


def test_an_unknown_mode_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match=r"Expected `progress` as True, False or one of \('auto', 'bar'"):
        convert(_items(2), tmp_path / "x.bzna", workers=0, order="source", progress="sometimes")
    assert list(tmp_path.iterdir()) == []


def test_convert_lines_on_a_terminal_and_a_bar_in_a_file_when_asked(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)  # a line after every image
    terminal = Terminal()
    convert(_items(3), tmp_path / "a.bzna", workers=0, order="source", progress="lines", log=terminal)
    lines = terminal.getvalue().splitlines()
    assert "\r" not in terminal.getvalue() and [ln.split(" in ")[0] for ln in lines] == [
        "1 of 3 images (33%)",
        "2 of 3 images (66%)",
        "3 of 3 images (100%)",
    ]
    log = io.StringIO()
    convert(_items(3), tmp_path / "b.bzna", workers=0, order="source", progress="bar", log=log)
    assert "\r" in log.getvalue() and "3/3" in log.getvalue()


def test_verify_progress_modes(tmp_path, monkeypatch):
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)
    path = tmp_path / "x.bzna"
    convert(_items(2), path, workers=0, order="source", progress=False)
    log = io.StringIO()
    assert verify(path, workers=1, decode=False, progress=True, log=log).ok  # auto, not a terminal
    assert [ln.split(" in ")[0] for ln in log.getvalue().splitlines()] == [
        "1 of 2 samples (50%)",
        "2 of 2 samples (100%)",
    ]
    terminal = Terminal()
    verify(path, workers=1, decode=False, progress="auto", log=terminal)
    assert "\r" in terminal.getvalue() and "2/2" in terminal.getvalue()
    quiet = Terminal()
    verify(path, workers=1, decode=False, log=quiet)  # Python's default: nothing
    assert quiet.getvalue() == ""


def test_the_cli_progress_flags(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(progress_module, "INTERVAL", 0.0)
    path = tmp_path / "x.bzna"
    convert(_items(2), path, workers=0, order="source", progress=False)
    flags = ["verify", str(path), "--no-decode", "-j", "1"]
    assert main(flags) == 0  # auto: stderr is no terminal here
    assert "2 of 2 samples (100%)" in capsys.readouterr().err
    assert main([*flags, "--no-progress"]) == 0
    assert "samples" not in capsys.readouterr().err
    assert main([*flags, "--progress", "none"]) == 0
    assert "samples" not in capsys.readouterr().err
    assert main([*flags, "--progress"]) == 0  # alone: the bar
    assert "\r" in capsys.readouterr().err
    out = tmp_path / "y.bzna"
    argv = ["convert", "folder", str(tmp_path / "none"), str(out), "-j", "0", "--progress", "lines"]
    assert main(argv) == 1  # the folder does not exist: --progress lines parses, and is no error
    assert "none" in capsys.readouterr().err
