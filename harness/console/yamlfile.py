"""Reading the YAML a user hands us (plans, cluster configs, env specs) with bounds: a UTF-8 file of at most
MAX_YAML_BYTES (its size checked before it is read), nested at most MAX_YAML_DEPTH deep (PyYAML's composer recurses
once per level: 30,000 '[' were a RecursionError), and at most MAX_YAML_NODES values once every alias is expanded. YAML anchors let a 1 KB file
stand for a billion values ("billion laughs"): PyYAML builds it without copying, but anything that walks or
prints the value (a check, an error message) then runs until memory is gone. The expanded size is counted on
the composed node graph, where each anchor is counted once per use without being expanded.
"""

from __future__ import annotations

import os
import stat

MAX_YAML_BYTES = 2**20  # the largest plan or config here is ~3 KB
MAX_YAML_NODES = 100_000  # values (scalars, lists, mappings) after expanding aliases; the largest plan has ~200
MAX_YAML_DEPTH = 64  # lists and mappings inside each other; the deepest plan here nests 4


class YamlRefused(ValueError):
    """A YAML file refused before it is parsed (too big, nested too deep, not UTF-8); the message says why."""


class YamlTooLarge(YamlRefused):
    """A YAML text over the bounds; the message says which bound."""


def read_yaml_text(path: str | os.PathLike) -> str:
    """The text of a YAML file: a regular file of at most MAX_YAML_BYTES, its size checked before anything is read
    (a 300 MB plan is not read to be refused), and UTF-8 (YamlRefused otherwise); OSError as open() raises it."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # a FIFO must not hang us
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise YamlRefused("not a regular file")
        if info.st_size > MAX_YAML_BYTES:
            raise YamlTooLarge(f"larger than {MAX_YAML_BYTES // 2**20} MiB")
        data = f.read(MAX_YAML_BYTES + 1)
    if len(data) > MAX_YAML_BYTES:  # it grew since fstat
        raise YamlTooLarge(f"larger than {MAX_YAML_BYTES // 2**20} MiB")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise YamlRefused(f"not UTF-8 ({exc.reason} at byte {exc.start:,})") from None


def load_yaml(text: str):
    """yaml.safe_load(text), after checking the bounds (YamlTooLarge); yaml.YAMLError as PyYAML raises it."""
    import yaml  # here, not at import: harness.envs' missing-deps check runs where PyYAML may be missing

    if len(text) > MAX_YAML_BYTES:
        raise YamlTooLarge(f"larger than {MAX_YAML_BYTES // 2**20} MiB")
    check_depth(text, yaml)
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is not None:
        expanded_size(node)
    return yaml.safe_load(text)


def check_depth(text: str, yaml) -> None:
    """YamlTooLarge if lists and mappings nest deeper than MAX_YAML_DEPTH, found on PyYAML's event stream (its
    parser is a loop; only the composer that builds nodes from it recurses)."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise YamlTooLarge(f"nested deeper than {MAX_YAML_DEPTH} levels of lists and mappings")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1


def expanded_size(root) -> int:
    """The number of values `root` (a yaml.Node) stands for with every alias expanded; YamlTooLarge above
    MAX_YAML_NODES or for a node that contains itself. Iterative, and each distinct node is sized once."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            children = _children(node, yaml)
            sizes[key] = 1 + sum(sizes[id(c)] for c in children)
            on_path.discard(key)
            if sizes[key] > MAX_YAML_NODES:
                raise YamlTooLarge(f"more than {MAX_YAML_NODES:,} values once its aliases (*name) are expanded")
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise YamlTooLarge("an alias refers to a value that contains it")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in _children(node, yaml) if id(c) not in sizes)
    return sizes[id(root)]


def _children(node, yaml) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
