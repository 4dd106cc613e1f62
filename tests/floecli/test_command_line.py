"""The floe command's surface, no server needed: help for every subcommand, exit codes,
and one-line errors for bad input and an unreachable server."""

from __future__ import annotations

import tomllib

import pytest

from floecli.main import SUBCOMMANDS, main, parser
from tests.floecli.run import REPO, floe

NAMES = [
    "console-producer",
    "console-consumer",
    "consumer-group-lag",
    "benchmark-producer",
    "benchmark-consumer",
    "file-reader",
    "diagnose-record",
    "file-scrubber",
]


def test_floe_is_installed_as_a_command_and_lists_its_subcommands():
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["floe"] == "floecli.main:main"
    assert len(SUBCOMMANDS) == 6
    done = floe("--help")
    assert done.returncode == 0
    for name in NAMES:
        assert name in done.stdout


@pytest.mark.parametrize("name", NAMES)
def test_each_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit) as exited:
        main([name, "--help"])
    assert exited.value.code == 0
    assert f"usage: floe {name}" in capsys.readouterr().out


def test_bad_input_exits_2_with_one_line():
    missing = floe("console-producer", "--topic", "t")  # no --bootstrap-server
    assert missing.returncode == 2 and "required" in missing.stderr
    assert "Traceback" not in missing.stderr
    bad = floe("console-producer", "-b", "127.0.0.1:1", "-t", "t", "-X", "oops")
    assert (bad.returncode, bad.stderr) == (
        2,
        "floe console-producer: -X wants KEY=VALUE, got 'oops'\n",
    )
    sasl = floe("consumer-group-lag", "-b", "127.0.0.1:1", "--sasl-mechanism", "PLAIN")
    assert sasl.returncode == 2 and len(sasl.stderr.splitlines()) == 1
    count = floe("benchmark-producer", "-b", "127.0.0.1:1", "-t", "t", "-n", "0")
    assert count.returncode == 2 and "--num-records" in count.stderr
    assert parser().parse_args(["file-reader", "x"]).command == "file-reader"


@pytest.mark.parametrize(
    "args",
    [
        ["console-producer", "-t", "t"],
        ["console-consumer", "-t", "t"],
        ["consumer-group-lag"],
        ["benchmark-producer", "-t", "t", "-n", "1"],
        ["benchmark-consumer", "-t", "t", "-n", "1"],
    ],
)
def test_an_unreachable_server_exits_1_with_one_line_within_the_bound(args):
    done = floe(*args, "-b", "127.0.0.1:1", "--request-timeout", "1.5", timeout_s=15)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"floe {args[0]}: no Kafka broker answered at 127.0.0.1:1")


def test_file_reader_says_what_is_wrong_with_a_file(tmp_path):
    missing = floe("file-reader", (tmp_path / "nope").as_uri())
    assert missing.returncode == 1 and len(missing.stderr.splitlines()) == 1
    junk = tmp_path / "junk"
    junk.write_bytes(b"x" * 100)
    done = floe("file-reader", junk.as_uri())
    assert done.returncode == 1
    assert done.stderr.strip().endswith("not a segment file: trailer magic is b'xxxxxxxx'")
    scheme = floe("file-reader", "ftp://host/file")
    assert scheme.returncode == 2 and "unsupported bucket URL scheme" in scheme.stderr


def test_the_rest_api_mode_says_what_is_missing_or_unreachable():
    neither = floe("consumer-group-lag")
    assert neither.returncode == 2 and "give -b HOST:PORT" in neither.stderr
    no_cluster = floe("consumer-group-lag", "--api-url", "http://127.0.0.1:1", "--api-key", "k")
    assert no_cluster.returncode == 2 and "--cluster" in no_cluster.stderr
    down = floe(
        "consumer-group-lag", "--api-url", "http://127.0.0.1:1", "--cluster", "vci_x",
        "--api-key", "k", "--request-timeout", "2",
    )  # fmt: skip
    assert down.returncode == 1
    assert down.stderr.startswith("floe consumer-group-lag: control plane unreachable at ")
    assert len(down.stderr.splitlines()) == 1


def test_diagnose_record_and_file_scrubber_say_what_is_missing_or_unreachable(monkeypatch):
    monkeypatch.delenv("FLOE_API_KEY", raising=False)
    for args in (["diagnose-record", "t", "0", "0"], ["file-scrubber"]):
        missing = floe(*args)
        assert (missing.returncode, missing.stderr) == (
            2,
            f"floe {args[0]}: needs --api-url, --cluster and an API key (--api-key or "
            "FLOE_API_KEY)\n",
        )
        down = floe(
            *args, "--api-url", "http://127.0.0.1:1", "--cluster", "vci_x", "--api-key", "k",
            "--request-timeout", "2",
        )  # fmt: skip
        assert down.returncode == 1
        assert down.stderr.startswith(f"floe {args[0]}: control plane unreachable at ")
        assert len(down.stderr.splitlines()) == 1
    negative = floe("diagnose-record", "t", "0", "-1")
    assert negative.returncode == 2
    assert floe("file-scrubber", "--yes").returncode == 2  # --yes only with --delete
