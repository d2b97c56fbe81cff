"""YAML documents that hold a list of records (OpenPipe ART's trajectory logs), read with PyYAML's safe constructor.

A YAML file is one document, so it is refused (as a problem) above ``ctx.max_bytes``. Detection treats a file as
YAML when its first non-blank line starts a block sequence (``- ``), which is how ``yaml.dump`` writes a list and
which no JSON or JSONL file does.

The document is composed item by item (libyaml's C parser when PyYAML has it, else PyYAML's own) and each item is
constructed before the next is composed. ``yaml.safe_load`` stops code, not expansion: an alias (``*a``) repeats
the node its anchor (``&a``) names, so ten levels of nine aliases name a billion nodes, and one 1 MB text repeated
20,000 times is 20 GB once a reader walks it. Aliases are legitimate (``yaml.dump`` anchors any object it meets
twice, as ART's logs do for a system message shared by the trajectories of a group), so they are counted, not
refused: while composing, every node counts one and its text its length, an alias the expanded size of the node
it names (``YAML_NODES``, ``YAML_TEXT``); past either budget the rest of the document is refused before anything
more is built, with a problem that names the line. A recursive alias (a node that contains itself) is refused:
it has no JSON form. A tag that names a Python type refuses its item. What the safe constructor builds that JSON
has no form for (``!!binary`` bytes, a ``!!set``, ``!!omap`` / ``!!pairs`` lists of pairs, dates) is made JSON
with the rest of a trajectory's metadata, each conversion noted (``engine.io.reading.jsonable``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)
from yaml.nodes import MappingNode, Node, SequenceNode
from yaml.parser import Parser
from yaml.reader import Reader
from yaml.resolver import Resolver
from yaml.scanner import Scanner

from engine.io.reading.budgets import declare
from engine.io.reading.context import LoadContext
from engine.io.reading.problems import RecordError
from engine.io.reading.records import BOM

PEEK_BYTES = 4096
# A YAML document may be 16 MiB (max_bytes); written out without aliases it holds at most ~8 M nodes (two bytes
# a node in flow style, ``[a,a,...]``); a real ART step (64 groups x 8 trajectories x 40 messages of ~15 nodes)
# holds ~300,000. A million-entry ``logs`` list composes and constructs in ~3.5 s.
YAML_NODES = declare(
    "yaml_nodes",
    "CREDITLENS_MAX_YAML_NODES",
    10_000_000,
    "nodes",
    "YAML document",
    "a YAML alias repeats the node its anchor names: ten levels of nine aliases name a billion nodes; an alias "
    "counts as the node it expands to",
)
# Four times the largest document (max_bytes, 16 MiB), all of it text: a system prompt shared by every trajectory
# of a step expands a few MB at most; one 1 MB choice repeated 20,000 times (20 GB once rendered) is refused.
YAML_TEXT = declare(
    "yaml_text",
    "CREDITLENS_MAX_YAML_TEXT",
    64 << 20,
    "characters of text",
    "YAML document",
    "one large text anchored once and aliased thousands of times is gigabytes once rendered; an alias counts as "
    "the text it expands to",
)
SNIFF_DEPTH = 3  # detection composes an item's collections to this depth (item, trajectories, trajectories[0])

try:  # libyaml's parser: ~25 times faster than PyYAML's own on a large log
    from yaml._yaml import CParser
except ImportError:  # pragma: no cover - PyYAML built without libyaml
    CParser = None
# libyaml refuses a ``\\udXXX`` escape (a lone surrogate) as invalid YAML, PyYAML's own parser reads it: a document
# libyaml stops at with this message is read again by PyYAML's parser from the item it stopped in.
LIBYAML_ESCAPE = "invalid Unicode character escape code"


class OverBudget(Exception):
    """The document's expanded size passed a budget (``reason``) at 0-based ``line``."""

    def __init__(self, reason: str, line: int | None):
        super().__init__(reason)
        self.reason, self.line = reason, line


class BudgetComposer(Composer):
    """PyYAML's composer with the expanded size of what it composed counted (``nodes``, ``text``) and held to the
    budgets as it goes; with ``depth``, collections deeper than it are read past and stand as empty ones."""

    def __init__(self, depth: int | None = None):
        Composer.__init__(self)
        self.nodes = self.text = 0
        self.max_nodes, self.max_text = YAML_NODES.value(), YAML_TEXT.value()
        self.sizes: dict[int, tuple[int, int]] = {}  # id(anchored node) -> its expanded (nodes, text)
        self.depth, self.max_depth = 0, depth

    def count(self, nodes: int, text: int, event) -> None:
        self.nodes += nodes
        self.text += text
        line = event.start_mark.line if event.start_mark is not None else None
        if self.nodes > self.max_nodes:
            raise OverBudget(YAML_NODES.over(self.nodes, "the YAML document, aliases expanded,"), line)
        if self.text > self.max_text:
            raise OverBudget(YAML_TEXT.over(self.text, "the YAML document, aliases expanded,"), line)

    def compose_node(self, parent, index):
        event = self.peek_event()
        if isinstance(event, AliasEvent):
            node = self.anchors.get(event.anchor)
            if node is not None:
                size = self.sizes.get(id(node))
                if size is None:  # its anchor is still being composed: the node would contain itself
                    raise OverBudget(f"recursive YAML alias *{event.anchor} (a node that contains itself)", None)
                self.count(*size, event)
            return Composer.compose_node(self, parent, index)
        if self.max_depth is not None and self.depth >= self.max_depth and not isinstance(event, ScalarEvent):
            return self.skip(event)
        nodes, text = self.nodes, self.text
        self.depth += 1
        node = Composer.compose_node(self, parent, index)
        self.depth -= 1
        if event.anchor is not None:
            self.sizes[id(node)] = (self.nodes - nodes, self.text - text)
        return node

    def compose_scalar_node(self, anchor):
        event = self.peek_event()
        self.count(1, len(event.value), event)
        return Composer.compose_scalar_node(self, anchor)

    def compose_sequence_node(self, anchor):
        self.count(1, 0, self.peek_event())
        return Composer.compose_sequence_node(self, anchor)

    def compose_mapping_node(self, anchor):
        self.count(1, 0, self.peek_event())
        return Composer.compose_mapping_node(self, anchor)

    def skip(self, start) -> Node:
        """Read past the collection that starts with event ``start``; an empty one of its kind stands for it (its
        anchors, and those inside it, name that stand-in)."""
        kind = SequenceNode if isinstance(start, SequenceStartEvent) else MappingNode
        tag = start.tag if start.tag not in (None, "!") else self.resolve(kind, None, start.implicit)
        node = kind(tag, [], start.start_mark, start.end_mark)
        level = 0
        while True:
            event = self.get_event()
            if getattr(event, "anchor", None) is not None and not isinstance(event, AliasEvent):
                self.anchors[event.anchor] = node
                self.sizes[id(node)] = (1, 0)
            if isinstance(event, (SequenceStartEvent, MappingStartEvent)):
                level += 1
            elif isinstance(event, (SequenceEndEvent, MappingEndEvent)):
                level -= 1
            if level == 0:
                return node


class _BudgetLoader(BudgetComposer, SafeConstructor, Resolver):
    """``BudgetComposer`` and PyYAML's safe constructor over a parser (``CBudgetLoader``, ``PyBudgetLoader``);
    ``items_done``: the top-level items composed so far."""

    def __init__(self, depth: int | None):
        BudgetComposer.__init__(self, depth)
        SafeConstructor.__init__(self)
        Resolver.__init__(self)
        self.items_done = 0

    def construct_item(self, node: Node) -> object:
        """The Python value of top-level item ``node``; the constructor's state is reset if it raises."""
        try:
            return self.construct_object(node, deep=True)
        finally:
            self.state_generators, self.recursive_objects = [], {}


class PyBudgetLoader(Reader, Scanner, Parser, _BudgetLoader):
    """PyYAML's own parser."""

    def __init__(self, stream: bytes, depth: int | None = None):
        Reader.__init__(self, stream)
        Scanner.__init__(self)
        Parser.__init__(self)
        _BudgetLoader.__init__(self, depth)


if CParser is not None:

    class CBudgetLoader(CParser, _BudgetLoader):
        """libyaml's parser."""

        def __init__(self, stream: bytes, depth: int | None = None):
            CParser.__init__(self, stream)
            _BudgetLoader.__init__(self, depth)

    LOADERS: tuple[type, ...] = (CBudgetLoader, PyBudgetLoader)
else:  # pragma: no cover
    LOADERS = (PyBudgetLoader,)

_SURROGATE = re.compile("[\ud800-\udfff]")
LONE_SURROGATE = "text with a lone UTF-16 surrogate (a \\udXXX escape without its pair)"


def _lone_surrogate(value: object) -> bool:
    """True if a string (or key) in ``value`` holds a lone surrogate, which YAML's ``\\u`` escapes can write and no
    tokenizer or encoder takes. Each object is visited once, so that aliases shared many times cost nothing."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            if _SURROGATE.search(v):
                return True
        elif isinstance(v, (dict, list)) and id(v) not in seen:
            seen.add(id(v))
            stack.extend([*v.keys(), *v.values()] if isinstance(v, dict) else v)
    return False


def looks_like_yaml_list(path: str) -> bool:
    """True if the first non-blank line of ``path`` starts a YAML block sequence (``- ...``)."""
    with open(path, "rb") as f:
        head = f.read(PEEK_BYTES)
    if head.startswith(BOM):
        head = head[len(BOM) :]
    first = next((line for line in head.splitlines() if line.strip()), b"")
    return first.startswith(b"- ") or first.rstrip() == b"-"


def _items(
    loader: _BudgetLoader, ctx: LoadContext, first: int | None, skip: int = 0
) -> Iterator[tuple[int | None, str, object]]:
    """The items of the list ``loader`` reads, each constructed as it is composed; the first ``skip`` are composed
    and passed over (another loader read them already)."""
    loader.get_event()  # stream start
    if loader.check_event(StreamEndEvent):
        ctx.problem(None, None, "expected a YAML list of records, got an empty document")
        return
    loader.get_event()  # document start
    if not loader.check_event(SequenceStartEvent):
        doc = loader.construct_item(loader.compose_node(None, None))
        ctx.problem(None, None, f"expected a YAML list of records, got {type(doc).__name__}")
        return
    loader.count(1, 0, loader.get_event())
    i = 0
    while not loader.check_event(SequenceEndEvent):
        if first is not None and i >= first:
            return
        node = loader.compose_node(None, i)
        if i < skip:
            i = loader.items_done = i + 1
            continue
        try:
            item = loader.construct_item(node)
        except yaml.constructor.ConstructorError as err:
            line = err.problem_mark.line + 1 if err.problem_mark else None
            ctx.problem(line, f"[{i}]", f"cannot read this item: {err.problem}; item skipped")
        except (ValueError, OverflowError) as err:  # a tagged or date-like scalar its type rejects: 2024-13-45
            ctx.problem(node.start_mark.line + 1, f"[{i}]", f"cannot read this item: {err}; item skipped")
        else:
            if _lone_surrogate(item):
                ctx.log.add_error(ctx.file, node.start_mark.line + 1, RecordError(None, LONE_SURROGATE), f"[{i}].")
            else:
                yield None, f"[{i}].", item
        i = loader.items_done = i + 1
    loader.get_event()  # sequence end
    loader.get_event()  # document end
    if not loader.check_event(StreamEndEvent):
        event = loader.get_event()
        ctx.problem(event.start_mark.line + 1, None, "a second YAML document after the list: not read")


def iter_yaml_records(
    path: str, ctx: LoadContext, first: int | None = None, depth: int | None = None
) -> Iterator[tuple[int | None, str, object]]:
    """Yield ``(None, "[i].", item)`` for each item of the YAML list in ``path``; problems for what cannot be read.
    ``first``: stop after that many items; ``depth``: collections nested deeper stand as empty ones (detection
    reads the first items' outline this way, not the whole document)."""
    size = os.path.getsize(path)
    if size > ctx.max_bytes:
        ctx.problem(None, None, f"YAML document of {size:,} bytes is over the {ctx.max_bytes:,}-byte limit (max_bytes)")
        return
    with open(path, "rb") as f:
        raw = f.read()
    done = 0
    for loader_type in LOADERS:
        loader = loader_type(raw, depth)
        try:
            yield from _items(loader, ctx, first, skip=done)
        except OverBudget as err:
            line = err.line + 1 if err.line is not None else None
            ctx.problem(line, None, f"{err.reason}; the rest of the file is not read")
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or str(err)
            if loader_type is not PyBudgetLoader and LIBYAML_ESCAPE in problem:
                done = loader.items_done  # PyYAML's parser reads the document again, from the item libyaml stopped in
                continue
            mark = getattr(err, "problem_mark", None)
            line = mark.line + 1 if mark is not None else None
            rest = "; the rest of the file is not read" if loader.items_done else ""
            ctx.problem(line, None, f"invalid YAML: {problem}{rest}")
        except RecursionError:
            ctx.problem(None, None, "invalid YAML: nested too deeply")
        finally:
            loader.dispose()
        return
