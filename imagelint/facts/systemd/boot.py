"""Boot reachability: which units the boot transaction pulls in, and one shortest chain for each.

The walk starts at ``default.target`` (and the unit it is an alias of) and follows what pulls a
unit in at start: ``Wants=``, ``Requires=``, ``BindsTo=``, ``Upholds=`` and the ``.wants/``,
``.requires/``, ``.upholds/`` link directories, plus activation: a reachable socket, timer or path
unit pulls in the unit it triggers, as an automount does its mount. Masked and missing units end a
branch. Conditions are not evaluated: this is "would be started", not "will succeed".
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

DEFAULT_TARGET = "default.target"


def boot_chains(
    resolve: Callable[[str], str | None], deps: Callable[[str], list[str]]
) -> dict[str, list[str]]:
    """Breadth-first from default.target: unit id -> chain of names from ``default.target`` to it.

    ``resolve(name)`` gives the id of the loadable, unmasked unit a name loads, or None;
    ``deps(unit_id)`` the names it pulls in, in a stable order.
    """
    root = resolve(DEFAULT_TARGET)
    if root is None:
        return {}
    chains: dict[str, list[str]] = {
        root: [DEFAULT_TARGET] if root == DEFAULT_TARGET else [DEFAULT_TARGET, root]
    }
    queue: deque[str] = deque([root])
    while queue:
        current = queue.popleft()
        for name in deps(current):
            unit = resolve(name)
            if unit is None or unit in chains:
                continue
            chains[unit] = [*chains[current], unit]
            queue.append(unit)
    return chains
