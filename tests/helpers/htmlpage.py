"""Reading a report page as a browser's DOM: elements by id, the text of one, and the points
each chart series draws (see gpuperf_rewrite/report/charts.py: a line's vertices are the M/L
commands of its path, a scatter's points its <use> elements)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "source", "wbr", "embed", "param", "track"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str], parent: "Node | None") -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node | str] = []

    def walk(self):
        yield self
        for c in self.children:
            if isinstance(c, Node):
                yield from c.walk()

    def text(self) -> str:
        # Elements apart by a space (table cells read "X1 applied", not "X1applied").
        return "".join(c if isinstance(c, str) else f" {c.text()} " for c in self.children)


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, None)
        self.cur = self.root

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: v or "" for k, v in attrs}, self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.cur))

    def handle_endtag(self, tag):
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data):
        self.cur.children.append(data)


class Dom:
    def __init__(self, html: str) -> None:
        b = _Builder()
        b.feed(html)
        self.root = b.root
        self.ids = {n.attrs["id"]: n for n in self.root.walk() if "id" in n.attrs}

    def text(self, element_id: str) -> str:
        return " ".join(self.ids[element_id].text().split())

    def points(self, gid: str) -> int:
        """Points drawn by the series whose <g> has id ``gid``."""
        g = self.ids[gid]
        uses = [n for n in g.walk() if n.tag == "use"]
        if uses:
            return len(uses)
        paths = [n.attrs.get("d", "") for n in g.walk() if n.tag == "path"]
        return sum(len(re.findall(r"[ML]", d)) for d in paths)

    def with_prefix(self, prefix: str) -> list[str]:
        return sorted(i for i in self.ids if i.startswith(prefix))
