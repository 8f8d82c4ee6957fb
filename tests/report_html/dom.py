"""A small DOM over html.parser, enough to query the report in tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser

VOID = {
    "area",
    "base",
    "br",
    "col",
    "embed",
    "hr",
    "img",
    "input",
    "link",
    "meta",
    "source",
    "track",
    "wbr",
}


@dataclass
class Element:
    tag: str
    attrs: dict[str, str | None]
    children: list[Element | str] = field(default_factory=list)

    def iter(self, tag: str | None = None) -> Iterator[Element]:
        if tag is None or self.tag == tag:
            yield self
        for c in self.children:
            if isinstance(c, Element):
                yield from c.iter(tag)

    def find_all(self, tag: str | None = None, **attrs: str) -> list[Element]:
        out = []
        for e in self.iter(tag):
            if all(e.attrs.get(k.rstrip("_").replace("_", "-")) == v for k, v in attrs.items()):
                out.append(e)
        return out

    def find(self, tag: str | None = None, **attrs: str) -> Element:
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag}> with {attrs}"
        return found[0]

    def by_id(self, ident: str) -> Element:
        return self.find(None, id=ident)

    def has_class(self, name: str) -> bool:
        return name in (self.attrs.get("class") or "").split()

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    @property
    def words(self) -> str:
        return " ".join(self.text.split())


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]
        self.doctype: str | None = None

    def handle_decl(self, decl: str) -> None:
        self.doctype = decl

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        el = Element(tag, dict(attrs))
        self.stack[-1].children.append(el)
        if tag not in VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.stack[-1].children.append(Element(tag, dict(attrs)))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                assert i == len(self.stack) - 1, f"</{tag}> closes unclosed <{self.stack[-1].tag}>"
                del self.stack[i:]
                return
        raise AssertionError(f"stray </{tag}>")

    def handle_data(self, data: str) -> None:
        self.stack[-1].children.append(data)


def parse(html: str) -> tuple[Element, str | None]:
    """The document element tree (tags must nest properly) and the doctype."""
    b = _Builder()
    b.feed(html)
    b.close()
    assert len(b.stack) == 1, f"unclosed <{b.stack[-1].tag}>"
    return b.root, b.doctype
