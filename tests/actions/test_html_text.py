from shared.actions.html_text import html_to_text


def test_visible_text_only_one_line_per_block() -> None:
    html = (
        "<html><head><title> The  Title </title><style>p {color: red}</style>"
        "<script>alert(1)</script></head><body><nav>Home</nav>"
        "<h1>Heading</h1><p>First   paragraph &amp; more.</p>"
        "<ul><li>one</li><li>two</li></ul><script>x()</script><p>Last</p></body></html>"
    )
    assert (
        html_to_text(html) == "The Title\n\nHome\nHeading\nFirst paragraph & more.\none\ntwo\nLast"
    )


def test_fragments_without_title() -> None:
    assert html_to_text("<p>a</p><p>b</p>") == "a\nb"
    assert html_to_text("") == ""
