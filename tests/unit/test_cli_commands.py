"""The command line's parser: ``run`` alone imports nothing of the other commands (its
start asks for the first listing once its command line is read), every other command
line sees every command."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scheduler.cli import build_parser

COMMANDS = {"run", "trainer", "policy", "simulate", "timeline", "train", "evaluate", "tune"}


def python(code: str) -> subprocess.CompletedProcess[str]:
    """``code`` run by a fresh interpreter; its exit status and output."""
    command = [sys.executable, "-c", code]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def test_run_builds_its_parser_without_the_other_commands_modules() -> None:
    code = (
        "import sys\n"
        "from scheduler.cli import build_parser\n"
        "build_parser(['run']).parse_args(['run', '--no-leader-elect'])\n"
        "heavy = ('numpy', 'scheduler.learn', 'scheduler.sim', 'scheduler.online')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("argv", [[], ["simulate"], ["--version"], ["runx"]])
def test_other_command_lines_see_every_command(argv: list[str]) -> None:
    commands = next(a for a in build_parser(argv)._actions if a.dest == "command")
    assert set(commands.choices) >= COMMANDS  # type: ignore[arg-type]


def test_run_alone_has_run_only() -> None:
    commands = next(a for a in build_parser(["run"])._actions if a.dest == "command")
    assert set(commands.choices) == {"run"}  # type: ignore[arg-type]


def test_a_native_crash_prints_every_threads_python_stack() -> None:
    """The command turns on faulthandler: a process that dies of a signal in native
    code (here an abort in a thread beside the main one) says where each thread was."""
    code = (
        "import os, threading, time\n"
        "from scheduler.cli import main\n"
        "main(['--version'])\n"
        "def waiting_beside():\n"
        "    time.sleep(30)\n"
        "threading.Thread(target=waiting_beside, daemon=True).start()\n"
        "time.sleep(0.2)\n"
        "os.abort()\n"
    )
    done = python(code)
    assert done.returncode == -6
    assert "Fatal Python error: Aborted" in done.stderr
    assert "in waiting_beside" in done.stderr  # the other thread's stack too
