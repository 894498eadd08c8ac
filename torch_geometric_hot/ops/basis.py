r"""The equivariant basis (``docs/design.md``) as data: one table per order
pair.

Each class :math:`\mu` is a set partition of the output and input index
positions. On the sparse input it is evaluated *exactly* in
:math:`O(n + m)` as a signed sum of **terms** (``docs/design.md``, "The 15
classes of 2→2"): a term is a *summary* of the input, read at a *selector*
of the output element.

Summaries of an order-2 input :math:`A` (on the pair entries):

=======  ==================================  ========  ==========
name     value                               lives on  group
=======  ==================================  ========  ==========
``E``    :math:`A_{ij}` (the entry itself)    entries   --
``ET``   :math:`A_{ji}` (0 when absent)       entries   --
``D``    :math:`A_{kk}`                       nodes     --
``R``    :math:`\sum_{(k,l) \in E} A_{kl}`    nodes     row node k
``C``    :math:`\sum_{(k,l) \in E} A_{kl}`    nodes     col node l
``DS``   :math:`\sum_k A_{kk}`                graphs    graph
``ES``   :math:`\sum_{(k,l) \in E} A_{kl}`    graphs    graph
=======  ==================================  ========  ==========

and of an order-1 input :math:`X`: ``X`` (:math:`X_k`, nodes) and ``XS``
(:math:`\sum_k X_k`, graphs).

Selectors of an output element: ``'self'`` (the same entry), ``'i'``/``'j'``
(its first/second node; on nodes ``'i'`` is the node itself), an integer
:math:`a` (the :math:`a`-th node of a hyperedge), ``'g'`` (its graph).

A class's **key group** (what attention normalises over) is the group of
its first term; the other terms are the distinct-index exclusions, whose
signs make the sums exact and whose *negative* terms say which keys a
softmax must mask (a key is excluded when a negative term covers it).
"""
from dataclasses import dataclass
from typing import Dict, List, Sequence, Tuple, Union

Selector = Union[str, int]
Term = Tuple[int, str, Selector]


@dataclass(frozen=True)
class EquivariantClass:
    r"""One basis element.

    Attributes:
        name (str): Short label, e.g. ``'2->2 #8'``.
        part (str): Output elements it writes: ``'diag'`` or ``'off'``
            (order-2 output), ``'node'``, ``'graph'`` or ``'hyperedge'``.
        terms (tuple): Signed terms :obj:`(sign, summary, selector)`; the
            first term defines the key group of aggregating classes.
        kind (str): ``'pointwise'`` (no sum), ``'local'`` (a sum over one
            node's entries) or ``'global'`` (a sum over the graph).
        partition (str): The set partition of output positions
            ``o1 o2 ..`` and input positions ``i1 i2 ..``, blocks separated
            by ``|`` (the dense oracle's label of the same class).
    """
    name: str
    part: str
    terms: Tuple[Term, ...]
    kind: str
    partition: str

    @property
    def aggregating(self) -> bool:
        return self.kind != 'pointwise'

    @property
    def pool(self) -> Tuple[str, Selector]:
        r"""The key group: :obj:`(summary, selector)` of the first term."""
        return self.terms[0][1], self.terms[0][2]

    @property
    def exclusions(self) -> Tuple[Tuple[str, Selector], ...]:
        r"""Terms whose keys are removed from the group (negative ones)."""
        return tuple((s, sel) for sign, s, sel in self.terms if sign < 0)


def _cls(name, part, terms, kind, partition) -> EquivariantClass:
    return EquivariantClass(name, part, tuple(terms), kind, partition)


def _table_2_2() -> List[EquivariantClass]:
    P, L, G = 'pointwise', 'local', 'global'
    return [
        _cls('1', 'diag', [(1, 'E', 'self')], P, 'o1o2i1i2'),
        _cls('2', 'off', [(1, 'E', 'self')], P, 'o1i1|o2i2'),
        _cls('3', 'off', [(1, 'ET', 'self')], P, 'o1i2|o2i1'),
        _cls('4', 'off', [(1, 'D', 'i')], P, 'o1i1i2|o2'),
        _cls('5', 'off', [(1, 'D', 'j')], P, 'o1|o2i1i2'),
        _cls('6', 'diag', [(1, 'R', 'i')], L, 'o1o2i1|i2'),
        _cls('7', 'diag', [(1, 'C', 'i')], L, 'o1o2i2|i1'),
        _cls('8', 'off', [(1, 'R', 'i'), (-1, 'E', 'self')], L, 'o1i1|o2|i2'),
        _cls('9', 'off', [(1, 'R', 'j'), (-1, 'ET', 'self')], L,
             'o1|o2i1|i2'),
        _cls('10', 'off', [(1, 'C', 'i'), (-1, 'ET', 'self')], L,
             'o1i2|o2|i1'),
        _cls('11', 'off', [(1, 'C', 'j'), (-1, 'E', 'self')], L,
             'o1|o2i2|i1'),
        _cls('12', 'diag', [(1, 'DS', 'g'), (-1, 'D', 'i')], G, 'o1o2|i1i2'),
        _cls('13', 'off', [(1, 'DS', 'g'), (-1, 'D', 'i'), (-1, 'D', 'j')], G,
             'o1|o2|i1i2'),
        _cls('14', 'diag', [(1, 'ES', 'g'), (-1, 'R', 'i'), (-1, 'C', 'i')],
             G, 'o1o2|i1|i2'),
        _cls('15', 'off', [(1, 'ES', 'g'), (-1, 'R', 'i'), (-1, 'C', 'i'),
                           (-1, 'R', 'j'), (-1, 'C', 'j'), (1, 'E', 'self'),
                           (1, 'ET', 'self')], G, 'o1|o2|i1|i2'),
    ]


def _table_2_1() -> List[EquivariantClass]:
    return [
        _cls('1', 'node', [(1, 'D', 'i')], 'pointwise', 'o1i1i2'),
        _cls('2', 'node', [(1, 'R', 'i')], 'local', 'o1i1|i2'),
        _cls('3', 'node', [(1, 'C', 'i')], 'local', 'o1i2|i1'),
        _cls('4', 'node', [(1, 'DS', 'g'), (-1, 'D', 'i')], 'global',
             'o1|i1i2'),
        _cls('5', 'node', [(1, 'ES', 'g'), (-1, 'R', 'i'), (-1, 'C', 'i')],
             'global', 'o1|i1|i2'),
    ]


def _table_2_0() -> List[EquivariantClass]:
    return [
        _cls('1', 'graph', [(1, 'DS', 'g')], 'global', 'i1i2'),
        _cls('2', 'graph', [(1, 'ES', 'g')], 'global', 'i1|i2'),
    ]


def _table_1_1() -> List[EquivariantClass]:
    return [
        _cls('1', 'node', [(1, 'X', 'i')], 'pointwise', 'o1i1'),
        _cls('2', 'node', [(1, 'XS', 'g'), (-1, 'X', 'i')], 'global',
             'o1|i1'),
    ]


def _table_1_0() -> List[EquivariantClass]:
    return [_cls('1', 'graph', [(1, 'XS', 'g')], 'global', 'i1')]


def _table_1_2() -> List[EquivariantClass]:
    return [
        _cls('1', 'diag', [(1, 'X', 'i')], 'pointwise', 'o1o2i1'),
        _cls('2', 'off', [(1, 'X', 'i')], 'pointwise', 'o1i1|o2'),
        _cls('3', 'off', [(1, 'X', 'j')], 'pointwise', 'o1|o2i1'),
        _cls('4', 'diag', [(1, 'XS', 'g'), (-1, 'X', 'i')], 'global',
             'o1o2|i1'),
        _cls('5', 'off', [(1, 'XS', 'g'), (-1, 'X', 'i'), (-1, 'X', 'j')],
             'global', 'o1|o2|i1'),
    ]


def _table_1_k(k: int) -> List[EquivariantClass]:
    outs = [f'o{a + 1}' for a in range(k)]
    classes = []
    for a in range(k):
        blocks = [o + 'i1' if b == a else o for b, o in enumerate(outs)]
        classes.append(
            _cls(str(a + 1), 'hyperedge', [(1, 'X', a)], 'pointwise',
                 '|'.join(blocks)))
    classes.append(
        _cls(str(k + 1), 'hyperedge', [(1, 'XS', 'g')] + [(-1, 'X', a)
                                                          for a in range(k)],
             'global', '|'.join(outs + ['i1'])))
    return classes


_TABLES = {
    (2, 2): _table_2_2,
    (2, 1): _table_2_1,
    (2, 0): _table_2_0,
    (1, 1): _table_1_1,
    (1, 0): _table_1_0,
    (1, 2): _table_1_2,
}

CLASS_SELECTIONS = ('all', 'local', 'light', 'aggregating')


def basis(in_order: int, out_order: int) -> List[EquivariantClass]:
    r"""All classes of the :obj:`in_order` → :obj:`out_order` basis; for
    :obj:`in_order=1, out_order=k >= 3` the :math:`1 + k` classes that reach
    k-uniform hyperedges (HOT App. A.2.2, Property 4)."""
    if (in_order, out_order) in _TABLES:
        return _TABLES[(in_order, out_order)]()
    if in_order == 1 and isinstance(out_order, int) and out_order >= 3:
        return _table_1_k(out_order)
    raise ValueError(f"unsupported orders in_order={in_order}, "
                     f"out_order={out_order}; supported: 2->2, 2->1, 2->0, "
                     f"1->1, 1->0, 1->2 and 1->k (k >= 3)")


def select_classes(
        in_order: int, out_order: int,
        classes: Union[str, Sequence[str]] = 'all'
) -> List[EquivariantClass]:
    r"""A subset of the basis.

    Args:
        classes (str or list): ``'all'``; ``'local'`` (drop the global
            classes, HOT Table 1 "w/o global"); ``'light'`` (pointwise only,
            HOT §4.1); ``'aggregating'`` (drop the pointwise ones); or a list
            of class names (e.g. ``['1', '2', '8']``).
    """
    table = basis(in_order, out_order)
    if isinstance(classes, str):
        if classes not in CLASS_SELECTIONS:
            raise ValueError(f"'classes' must be one of {CLASS_SELECTIONS} "
                             f"or a list of class names, got {classes!r}")
        keep = {
            'all': lambda c: True,
            'local': lambda c: c.kind != 'global',
            'light': lambda c: c.kind == 'pointwise',
            'aggregating': lambda c: c.kind != 'pointwise',
        }[classes]
        return [c for c in table if keep(c)]
    names = [str(c) for c in classes]
    known = {c.name: c for c in table}
    unknown = [c for c in names if c not in known]
    if unknown or not names:
        raise ValueError(f"'classes' names {unknown or names} unknown for "
                         f"{in_order}->{out_order}; known: {list(known)}")
    return [known[c] for c in dict.fromkeys(names)]


def output_parts(out_order: int) -> Tuple[str, ...]:
    r"""The output element kinds of an order."""
    return {0: ('graph', ), 1: ('node', ), 2: ('diag', 'off')}.get(
        out_order, ('hyperedge', ))


def group_by_part(
        classes: Sequence[EquivariantClass]
) -> Dict[str, List[EquivariantClass]]:
    r"""Classes grouped by the output part they write."""
    out: Dict[str, List[EquivariantClass]] = {}
    for c in classes:
        out.setdefault(c.part, []).append(c)
    return out
