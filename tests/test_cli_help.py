"""The command line as a newcomer meets it (issue 39 item 3).

``bzna-tf --version``; an "examples:" section in every command's help whose commands are real (each
parses, and those the docs' small workspace has data for run); flag names that say what they count
(``-j/--processes`` and ``--task-index/--num-tasks`` for convert, ``-j/--threads`` for verify), the
old names kept for one release with a warning; ``preview --size H [W]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex

import _docs_workspace
import pytest
from conftest import ROOT

import bzna_tf
from bzna_tf.cli import build_parser, example_commands, main


def _parsers(parser=None, name="bzna-tf"):
    """Every parser of the command line, with its command ("bzna-tf", "bzna-tf service worker")."""
    parser = parser or build_parser()
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child_name, child in action.choices.items():
                yield from _parsers(child, f"{name} {child_name}")


COMMANDS = [name for name, _ in _parsers()]


def test_version_prints_the_version(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"bzna-tf {bzna_tf.__version__}\n"


def test_an_error_is_one_line_and_status_1_a_command_line_that_does_not_parse_status_2(tmp_path, capsys):
    # As docs/reference/cli.md says.
    assert main(["info", str(tmp_path / "nothing.bzna")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bzna-tf info: ") and "nothing.bzna" in err
    for argv in (["info"], ["preview", "--no-such-flag", "x.bzna"]):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 2
        assert "usage: bzna-tf" in capsys.readouterr().err


def test_python_m_bzna_tf_is_the_command(tmp_path):
    import subprocess
    import sys

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "bzna_tf", "info", str(tmp_path / "none.bzna")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr.startswith("bzna-tf info: "), done.stderr
    assert "none.bzna" in done.stderr


def test_every_command_is_checked():
    assert {"bzna-tf", "bzna-tf convert", "bzna-tf verify", "bzna-tf service worker"} <= set(COMMANDS)
    assert len(COMMANDS) == 9


@pytest.mark.parametrize("name", COMMANDS)
def test_every_help_has_examples_and_each_example_parses(name, monkeypatch, capsys):
    parser = dict(_parsers())[name]
    text = parser.format_help()
    assert "\nexamples:\n  " in text, text
    examples = text[text.index("\nexamples:\n") :]
    assert max(len(line) for line in examples.splitlines()) <= 100, examples  # a terminal's width
    commands = example_commands(parser)
    assert commands, examples
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "3")
    for command in commands:
        assert command.startswith(f"{name} ") or name == "bzna-tf", command
        argv = shlex.split(os.path.expandvars(command))[1:]
        if "--help" in argv:
            with pytest.raises(SystemExit) as e:
                build_parser().parse_args(argv)
            assert e.value.code == 0 and "examples:" in capsys.readouterr().out
            continue
        try:
            args = build_parser().parse_args(argv)
        except SystemExit:  # argparse says why on stderr
            pytest.fail(f"{command!r} does not parse: {capsys.readouterr().err}")
        assert callable(args.run)
        assert not capsys.readouterr().err, command  # no old flag name among the examples


# The examples run on the docs' workspace (tests/_docs_workspace.py: train.bzna, shards/, images/, ...),
# in order (samplelist --check reads the list an earlier example writes). The others need data or a
# cluster it does not have, or run until killed.
RUN = ("bzna-tf info", "bzna-tf samplelist", "bzna-tf verify")


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cli-examples") / "ws"
    folder.mkdir()
    _docs_workspace.build(folder)
    return folder


@pytest.mark.parametrize("name", RUN)
def test_the_examples_run_on_small_data(name, workspace, tmp_path, monkeypatch, capsys):
    folder = _docs_workspace.copy(workspace, tmp_path / "ws")
    monkeypatch.chdir(folder)
    commands = example_commands(dict(_parsers())[name])
    assert commands
    for command in commands:
        status = main(shlex.split(command)[1:])
        out, err = capsys.readouterr()
        assert status == 0, f"{command}: {err}"
        assert out.strip(), command
    if name == "bzna-tf samplelist":
        assert (folder / "lists" / "train.list").exists() and (folder / "val.list").exists()


# ------------------------------------------------------------------------------------- renamed flags


def _convert_args(*flags):
    return build_parser().parse_args(["convert", "folder", "images/", "out.bzna", *flags])


def test_convert_processes_and_array_tasks_have_names_that_say_what_they_count(capsys):
    args = _convert_args("-j", "4", "--task-index", "2", "--num-tasks", "8")
    assert (args.processes, args.task_index, args.num_tasks) == (4, 2, 8)
    assert _convert_args("--processes", "0").processes == 0
    assert not capsys.readouterr().err
    convert = build_parser()._subparsers._group_actions[0].choices["convert"]
    help_text = " ".join(convert.format_help().split())
    # Python 3.13's argparse names the value once: "-j, --processes N"
    assert re.search(r"-j( N)?, --processes N encoding processes", help_text)
    assert "--task-index I" in help_text and "--num-tasks T" in help_text
    assert "--workers" not in help_text and "--num-workers" not in help_text  # the old names are hidden


@pytest.mark.parametrize(
    ("old", "new", "dest"),
    [
        ("--workers", "--processes (-j)", "processes"),
        ("--worker-index", "--task-index", "task_index"),
        ("--num-workers", "--num-tasks", "num_tasks"),
    ],
)
def test_the_old_convert_names_still_work_for_a_release_and_say_the_new_one(capsys, old, new, dest):
    args = _convert_args(old, "3")
    assert getattr(args, dest) == 3
    assert capsys.readouterr().err == (
        f"bzna-tf convert: warning: {old} is renamed {new}; the old name will be removed in the next "
        "release\n"
    )


def test_verify_threads(capsys):
    parser = build_parser()
    assert parser.parse_args(["verify", "x.bzna", "-j", "3"]).threads == 3
    assert parser.parse_args(["verify", "x.bzna", "--threads", "5"]).threads == 5
    assert parser.parse_args(["verify", "x.bzna"]).threads is None
    assert not capsys.readouterr().err
    assert parser.parse_args(["verify", "x.bzna", "--workers", "2"]).threads == 2
    assert "--workers is renamed --threads (-j)" in capsys.readouterr().err
    # It said "Expected workers >= 1. Received: workers=0", the API's argument.
    assert main(["verify", "x.bzna", "-j", "0"]) == 1
    assert capsys.readouterr().err == "bzna-tf verify: Expected --threads (-j) >= 1. Received: --threads 0\n"


TOGETHER = "Expected --task-index and --num-tasks together. Received:"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["-j", "-1"], "Expected --processes >= 0. Received: --processes -1"),
        (["--num-shards", "0"], "Expected --num-shards >= 1. Received: --num-shards 0"),
        (["--task-index", "1"], f"{TOGETHER} --task-index 1 alone"),
        (["--num-tasks", "4"], f"{TOGETHER} --num-tasks 4 alone"),
        (
            ["--task-index", "4", "--num-tasks", "4"],
            "Expected --task-index in [0, 4) (--num-tasks 4). Received: --task-index 4",
        ),
        (["--num-workers", "0", "--worker-index", "0"], "Expected --num-tasks >= 1. Received: --num-tasks 0"),
        # These named the API's arguments: "shard_size=-1000000.0 bytes".
        (["--shard-size", "-1"], "Expected --shard-size > 0 (megabytes). Received: --shard-size -1"),
        (["--shard-size", "nan"], "Expected --shard-size > 0 (megabytes). Received: --shard-size nan"),
    ],
)
def test_counts_are_checked_with_the_flags_names_before_the_source_is_read(tmp_path, capsys, flags, message):
    missing = tmp_path / "no-such-folder"  # reading the source would fail with another message
    assert main(["convert", "folder", str(missing), str(tmp_path / "x.bzna"), *flags]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == f"bzna-tf convert: {message}"


# ------------------------------------------------------------------------------------- preview --size


def test_preview_size_reads_h_or_h_w(capsys):
    parser = build_parser()
    assert parser.parse_args(["preview", "x.bzna", "-o", "g.png"]).size == [128, 128]
    assert parser.parse_args(["preview", "x.bzna", "-o", "g.png", "--size", "96"]).size == [96, 96]
    assert parser.parse_args(["preview", "x.bzna", "-o", "g.png", "--size", "96", "64"]).size == [96, 64]
    with pytest.raises(SystemExit) as e:
        parser.parse_args(["preview", "x.bzna", "-o", "g.png", "--size", "1", "2", "3"])
    assert e.value.code == 2
    assert "argument --size: expected H or H W. Received: 1 2 3" in capsys.readouterr().err
    preview = parser._subparsers._group_actions[0].choices["preview"]
    assert "[--size H [W]]" in preview.format_usage() and "--size H [W]  " in preview.format_help()
    assert "[H [W] ...]" not in preview.format_help()


# ------------------------------------------------------------------- usage errors, --progress, pipes


def test_a_missing_argument_found_after_parsing_is_a_usage_error_status_2(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["samplelist", str(tmp_path / "x.bzna")])  # no -o LIST
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: bzna-tf samplelist")
    assert err.endswith("bzna-tf samplelist: error: give the .bzna files and -o LIST (or --check LIST)\n")


def test_a_seed_with_order_source_is_refused_it_would_change_nothing(tmp_path, capsys):
    # The file --order source --seed 5 wrote was byte-identical to --order source's: the seed did nothing.
    missing = tmp_path / "no-such-folder"  # refused before the source is read
    with pytest.raises(SystemExit) as e:
        main(["convert", "folder", str(missing), str(tmp_path / "x.bzna"), "--order=source", "--seed=5"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "error: --seed 5 picks the shuffle of --order shuffle; --order source" in err
    assert build_parser().parse_args(["convert", "folder", "a", "b.bzna"]).seed is None  # not given
    assert main(["convert", "folder", str(missing), str(tmp_path / "x.bzna"), "--order", "source"]) == 1
    assert capsys.readouterr().err.endswith("no-such-folder: not a folder\n")  # the seed is not in question


@pytest.mark.parametrize(
    ("argv", "mode", "files"),
    [
        (["verify", "--progress", "a.bzna", "b.bzna"], "bar", ["a.bzna", "b.bzna"]),
        (["verify", "a.bzna", "--progress"], "bar", ["a.bzna"]),
        (["verify", "--progress", "lines", "a.bzna"], "lines", ["a.bzna"]),
        (["verify", "--progress=none", "a.bzna"], "none", ["a.bzna"]),
        (["verify", "--no-progress", "--", "--progress"], "none", ["--progress"]),
        (["verify", "--prog", "a.bzna"], "bar", ["a.bzna"]),  # argparse's abbreviation
    ],
)
def test_progress_alone_before_a_file_does_not_take_the_file_as_its_mode(argv, mode, files, monkeypatch):
    # It did: "argument --progress: invalid choice: 'a.bzna'", though the help says "--progress alone: bar".
    seen = {}
    monkeypatch.setattr("bzna_tf.cli._verify", lambda args: seen.update(vars(args)) or 0)
    build = build_parser

    def parser():
        p = build()
        verify = p._subparsers._group_actions[0].choices["verify"]
        verify.set_defaults(run=lambda args: seen.update(vars(args)) or 0)
        return p

    monkeypatch.setattr("bzna_tf.cli.build_parser", parser)
    assert main(argv) == 0
    assert seen["progress"] == mode and seen["files"] == files


def test_progress_on_a_command_without_it_is_reported_as_typed(capsys):
    with pytest.raises(SystemExit):
        main(["info", "--progress", "x.bzna"])
    err = capsys.readouterr().err
    assert "unrecognized arguments: --progress" in err and "--progress=bar" not in err


def test_output_into_a_closed_pipe_ends_quietly_with_status_141(flat_shards):
    # `bzna-tf info ... | head -1` printed "bzna-tf info: [Errno 32] Broken pipe" and exited 1.
    import subprocess
    import sys

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    command = [sys.executable, "-m", "bzna_tf", "info", flat_shards[0]]
    read, write = os.pipe()
    os.close(read)  # the reader has gone before the first line
    try:
        done = subprocess.run(command, stdout=write, stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (141, "")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith(flat_shards[0]), done.stderr
