"""The programs the script derives from a question, run for real."""

from __future__ import annotations

import subprocess
import sys

import pytest

from devstack.scripted_model.programs import program_for


def _output(source: str) -> str:
    ran = subprocess.run(
        [sys.executable, "-c", source], capture_output=True, text=True, timeout=30, check=True
    )
    return ran.stdout.strip()


@pytest.mark.parametrize(
    ("question", "printed"),
    [
        ("What is the square root of 2, to 12 decimal places? Use Python.", "1.414213562373"),
        ("square root of 10, to 3 decimal places", "3.162"),
        ("What is the square root of 16?", "4.0"),
        ("Compute 12 * 7 please", "84"),
        ("what is 2.5 + 4", "6.5"),
        ("how about 9 - 11", "-2"),
        ("What is 2 ** 100? Use Python.", "1267650600228229401496703205376"),
        ("17 // 5, then", "3"),
        ("17 % 5", "2"),
        ("the numbers 3 and 4", "['3', '4']"),
        ("nothing numeric", "[]"),
    ],
)
def test_derived_program_prints_the_answer(question: str, printed: str) -> None:
    assert _output(program_for(question)) == printed


def test_fenced_block_wins_over_derivation() -> None:
    assert program_for("2 + 2\n```python\nprint('hi')\n```") == "print('hi')\n"
