from shared.actions.docstrings import parse_docstring


def test_summary_and_args_with_types_and_continuations() -> None:
    doc = parse_docstring(
        """Convert a length.

        Works for metric and imperial units.

        Args:
            value (float): the amount,
                in the source unit
            unit: the unit's symbol
            **extra: ignored

        Returns:
            str: the converted value
        """
    )
    assert doc.summary == "Convert a length. Works for metric and imperial units."
    assert doc.args == {
        "value": "the amount, in the source unit",
        "unit": "the unit's symbol",
        "extra": "ignored",
    }


def test_narrow_indents_and_missing_docstrings() -> None:
    doc = parse_docstring("Go.\n\nArgs:\n  a: first\n    more\n  b: second\n")
    assert doc.args == {"a": "first more", "b": "second"}
    assert parse_docstring(None).summary == "" and parse_docstring(None).args == {}
