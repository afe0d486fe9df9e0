from taskyard.agentkit.actions import BaseAction, tool_api
from taskyard.agentkit.actions.docstrings import parse_docstring


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


def test_numpy_style() -> None:
    doc = parse_docstring(
        """Convert a length.

        Parameters
        ----------
        value : float
            the amount,
            in the source unit
        unit : str, optional
            the unit's symbol

        Returns
        -------
        str
        """
    )
    assert doc.summary == "Convert a length."
    assert doc.args == {"value": "the amount, in the source unit", "unit": "the unit's symbol"}


def test_sphinx_style() -> None:
    doc = parse_docstring(
        """Convert a length.

        :param value: the amount,
            in the source unit
        :type value: float
        :param str unit: the unit's symbol
        :returns: the converted value
        """
    )
    assert doc.summary == "Convert a length."
    assert doc.args == {"value": "the amount, in the source unit", "unit": "the unit's symbol"}


def test_attributes_are_not_arguments() -> None:
    doc = parse_docstring("A tool.\n\nAttributes:\n    cache: what it keeps\n")
    assert doc.summary == "A tool." and doc.args == {}


class NumPyTool(BaseAction):
    """Convert lengths."""

    def run(self, value: float, unit: str = "m") -> str:
        """Convert.

        Parameters
        ----------
        value : float
            the amount
        unit : str
            the target unit
        """
        return f"{value}{unit}"


class SphinxKit(BaseAction):
    """Lengths, as a toolkit."""

    @tool_api
    def convert(self, value: float) -> str:
        """Convert a length to metres.

        :param value: the amount in feet
        """
        return str(value * 0.3048)


def test_plugin_actions_in_numpy_and_sphinx_style_keep_their_argument_descriptions() -> None:
    numpy_props = NumPyTool.tool_schemas()[0]["function"]["parameters"]["properties"]
    assert numpy_props["value"]["description"] == "the amount"
    assert numpy_props["unit"]["description"] == "the target unit"
    (kit,) = SphinxKit.tool_schemas()
    assert kit["function"]["description"] == "Convert a length to metres."
    assert kit["function"]["parameters"]["properties"]["value"]["description"] == (
        "the amount in feet"
    )
