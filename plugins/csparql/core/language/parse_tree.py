"""Reading lark's parse trees by what their parts are: the child of a rule (``child``), the token of a
terminal (``token``), the subtrees of a node (``subtrees``: the operands of an operator, with its keywords
and punctuation left out). The tree builders (``csparql.core.language.builder``, ``csparql.core.language.rspql``) take
a node's parts with these rather than by their position among its children.
"""

from __future__ import annotations

from lark import Token, Tree


def is_tree(node, name: str) -> bool:
    """Whether ``node`` is a tree of the rule ``name``."""
    return isinstance(node, Tree) and node.data == name


def is_token(node, *types: str) -> bool:
    """Whether ``node`` is a token of one of the terminals ``types``."""
    return isinstance(node, Token) and node.type in types


def subtrees(tree: Tree) -> list[Tree]:
    """The children of ``tree`` that are trees (its keywords and operators left out), in order."""
    return [child for child in tree.children if isinstance(child, Tree)]


def only_subtree(tree: Tree) -> Tree:
    """The one child of ``tree`` that is a tree (what a rule such as ``filter`` or ``values_clause`` wraps)."""
    (child,) = subtrees(tree)
    return child


def only_child(tree: Tree) -> Tree | Token:
    """The one child of a rule that wraps one token or tree (``var``, ``iri``, ``string``, ``count_number``)."""
    (node,) = tree.children
    return node


def child(tree: Tree, *rules: str) -> Tree | None:
    """The first child of ``tree`` of one of ``rules``, or None."""
    for node in tree.children:
        if isinstance(node, Tree) and node.data in rules:
            return node
    return None


def children(tree: Tree, *rules: str) -> list[Tree]:
    """The children of ``tree`` of one of ``rules``, in order."""
    return [node for node in tree.children if isinstance(node, Tree) and node.data in rules]


def token(tree: Tree, *types: str) -> Token | None:
    """The first token of ``tree`` of one of the terminals ``types``, or None."""
    for node in tree.children:
        if isinstance(node, Token) and node.type in types:
            return node
    return None


def first_token(tree: Tree) -> Token:
    """The token that begins ``tree`` (its keyword, function name or the one token it holds)."""
    for node in tree.children:
        if isinstance(node, Token):
            return node
    raise ValueError(f"{tree.data} has no token")
