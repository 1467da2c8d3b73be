"""Validate a retention root's ref before it is stored: a ref or ``KIND:ID`` that names something the platform has."""

from __future__ import annotations

from dsv_platform.bootstrap import Platform
from dsv_platform.core.errors import ConfigurationError, DsvError, NotFoundError
from dsv_platform.core.lineage.lineage import parse_node
from dsv_platform.core.publication.refs import parse_ref
from dsv_platform.core.retention.gc import build_graph
from dsv_platform.core.retention.gc_roots import published_by_version, resolve_root
from dsv_platform.services.retention import gc as gc_service

_FORMS = "NAME:VER@sha256:<hash>, NAME:VER@ALIAS, NAME:VER~N or KIND:ID such as model_run:<hash>"


def check_syntax(ref: str) -> None:
    """``ref`` is a node id (``KIND:ID``) or a dataset ref (optionally ``~N``); a path such as ``../../etc`` is refused (exit 2)."""
    if parse_node(ref) is not None:
        return
    base, tilde, count = ref.partition("~")
    if tilde and not (count.isdigit() and int(count) > 0):
        raise ConfigurationError(f"retention ref {ref!r}: ~N needs a positive count; expected {_FORMS}")
    try:
        parse_ref(base)
    except DsvError as exc:
        raise ConfigurationError(f"retention ref {ref!r} is neither a dataset ref nor KIND:ID; expected {_FORMS}") from exc


def check_root_ref(ref: str, platform: Platform) -> None:
    """Refuse a ref that is malformed (exit 2) or names nothing in the registry or the object store (exit 3 NOT_FOUND)."""
    check_syntax(ref)
    tables, landing = platform.existing_tables(), platform.existing_landing()
    inv = gc_service.collect_inventory(platform.registry, platform.store, tables=tables, landing=landing)
    graph = build_graph(inv)
    aliases = {a.node[1]: a.node for a in inv.aliases}
    nodes = resolve_root(ref, published_by_version(inv), graph, aliases)
    known = graph.nodes() | set(aliases.values())
    missing = [f"{kind}:{ident}" for kind, ident in nodes if (kind, ident) not in known]
    if not nodes or missing:
        raise NotFoundError(f"retention ref {ref!r} names nothing the platform has{(' (' + ', '.join(missing[:3]) + ')') if missing else ''}", ref=ref)
