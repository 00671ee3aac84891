"""Reading the YAML a user hands us (plans, cluster configs, env specs) with bounds: a file of at most
MAX_YAML_BYTES, and at most MAX_YAML_NODES values once every alias is expanded. YAML anchors let a 1 KB file
stand for a billion values ("billion laughs"): PyYAML builds it without copying, but anything that walks or
prints the value (a check, an error message) then runs until memory is gone. The expanded size is counted on
the composed node graph, where each anchor is counted once per use without being expanded.
"""

from __future__ import annotations

MAX_YAML_BYTES = 2**20  # the largest plan or config here is ~3 KB
MAX_YAML_NODES = 100_000  # values (scalars, lists, mappings) after expanding aliases; the largest plan has ~200


class YamlTooLarge(ValueError):
    """A YAML text over the bounds; the message says which bound."""


def load_yaml(text: str):
    """yaml.safe_load(text), after checking the bounds (YamlTooLarge); yaml.YAMLError as PyYAML raises it."""
    import yaml  # here, not at import: harness.envs' missing-deps check runs where PyYAML may be missing

    if len(text) > MAX_YAML_BYTES:
        raise YamlTooLarge(f"larger than {MAX_YAML_BYTES // 2**20} MiB")
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is not None:
        expanded_size(node)
    return yaml.safe_load(text)


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
