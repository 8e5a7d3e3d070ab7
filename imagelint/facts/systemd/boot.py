"""Boot reachability: which units the boot transaction pulls in, and one shortest chain for each.

The walk starts at ``default.target`` (and the unit it is an alias of) and follows what pulls a
unit in at start: ``Wants=``, ``Requires=``, ``BindsTo=``, ``Upholds=`` and the ``.wants/``,
``.requires/``, ``.upholds/`` link directories, plus activation: a reachable socket, timer or path
unit pulls in the unit it triggers, as an automount does its mount. Masked and missing units end a
branch. Conditions are not evaluated: this is "would be started", not "will succeed".

A *partial tree* (an application layer, a rule example: unit files but no ``default.target`` at
all) is walked as if it sat on a stock systemd base: ``default.target`` is assumed to be
``multi-user.target`` (the server default), and a standard target the tree has no unit file for is
a *stub* that pulls in what the tree links into its ``.wants/`` (``.requires/``, ``.upholds/``)
directories plus what systemd's own target pulls in (:data:`STOCK_TARGET_DEPS`). This is the one
definition of "started at boot": ``imagelint units`` and every rule read the chains computed here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

DEFAULT_TARGET = "default.target"
ASSUMED_DEFAULT = "multi-user.target"  # what default.target is taken to be in a partial tree

# What systemd 252's own target units pull in (Requires=/Wants=), for stub targets of a partial tree
STOCK_TARGET_DEPS: dict[str, tuple[str, ...]] = {
    "graphical.target": ("multi-user.target",),
    "multi-user.target": ("basic.target",),
    "basic.target": ("sysinit.target", "sockets.target", "timers.target", "paths.target", "slices.target"),
    "sysinit.target": ("local-fs.target", "swap.target"),
}


def boot_chains(
    resolve: Callable[[str], str | None],
    deps: Callable[[str], list[str]],
    *,
    assumed_default: str | None = None,
) -> dict[str, list[str]]:
    """Breadth-first from default.target: unit id -> chain of names from ``default.target`` to it.

    ``resolve(name)`` gives the id of the loadable, unmasked unit a name loads, or None;
    ``deps(unit_id)`` the names it pulls in, in a stable order. ``assumed_default`` is the unit
    ``default.target`` stands for when ``resolve`` finds none (a partial tree, see above).
    """
    root = resolve(DEFAULT_TARGET)
    if root is None and assumed_default is not None:
        root = resolve(assumed_default)
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
