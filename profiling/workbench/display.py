"""Tables for people: what a notebook shows of a DataFrame that stays in base units.

The workbench's DataFrames keep base units (seconds, bytes, bytes/s, FLOP); a column's
name carries its unit (:mod:`profiling.harness.measure`). What a notebook *displays* is
this module's view of them: times in µs, bandwidth in GB/s, FLOP rates in TFLOP/s, sizes
in KiB/MiB/GiB, integers as integers, ``—`` for a missing value, config labels in the
op's own field order (``b,t,c``), every row (in a scroll box) and every column (the box
scrolls sideways rather than cutting the table off). Cell text is HTML-escaped (kernel
names hold ``<`` and ``>``).

:class:`Table` is a DataFrame whose notebook display is that view; the Workbench returns
it, so ``wb.timing()`` is still a DataFrame to compute with. :func:`people` gives the
view as a DataFrame of strings, :func:`to_html` as HTML.
"""

from __future__ import annotations

import html
from collections.abc import Callable

import pandas as pd

from .. import readable
from ..harness.ops import get_op
from ..readable import header

MAX_HEIGHT = "36em"


def config_in_op_order(df: pd.DataFrame) -> pd.DataFrame:
    """``config`` labels written in each op's field order (``b=16,t=1500,c=1024``), fields after ``config``.

    Profiles store configs with sorted keys (``b,c,t``); timing tables in the op's order.
    Rows whose op is unknown keep their label.
    """
    if "config" not in df or "op" not in df or df.empty:
        return df
    out = df.copy()
    fields: list[str] = []
    labels = []
    for op_name, label in zip(out["op"], out["config"], strict=True):
        try:
            op = get_op(str(op_name))
            parts = dict(item.split("=", 1) for item in str(label).split(",") if "=" in item)
            labels.append(
                ",".join(f"{k}={parts[k]}" for k in op.config_fields) if set(parts) == set(op.config_fields) else label
            )
            fields += [f for f in op.config_fields if f not in fields]
        except (KeyError, ValueError):
            labels.append(label)
    out["config"] = pd.Series(labels, index=out.index, dtype=object).where(out["config"].notna(), out["config"])
    present = [f for f in fields if f in out]
    if present:
        rest = [c for c in out.columns if c not in present]
        at = rest.index("config") + 1
        out = out[[*rest[:at], *present, *rest[at:]]]
    return out


def people(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` as text for people (:func:`profiling.readable.people`), configs in each op's field order."""
    return readable.people(config_in_op_order(df))


_CSS = [
    {"selector": "", "props": "border-collapse:collapse;font-size:12px;font-variant-numeric:tabular-nums"},
    {
        "selector": "th",
        "props": "position:sticky;top:0;background:#f5f5f5;text-align:right;padding:3px 8px;"
        "border-bottom:1px solid #bbb;white-space:normal;vertical-align:bottom;min-width:4em",
    },
    {"selector": "td", "props": "padding:2px 8px;border-bottom:1px solid #eee;vertical-align:top"},
    {"selector": "tbody tr:hover", "props": "background:#f0f6ff"},
]
NUMBER_CELL = {"text-align": "right", "white-space": "nowrap"}
"""A number is never broken across lines (nor cut: the box scrolls sideways instead)."""
TEXT_CELL = {"text-align": "left", "white-space": "nowrap"}
"""Short text (a config, a dtype) stays on its line."""
LONG_TEXT_CELL = {"text-align": "left", "white-space": "normal", "overflow-wrap": "anywhere"}
LONG_TEXT_CELL |= {"min-width": "14em", "max-width": "28em"}
"""Long text (kernel names, flags, paths, ncu's messages) wraps within a column of readable width."""
LONG_TEXT = 28
"""A text column holding a value longer than this many characters wraps."""


def to_html(df: pd.DataFrame, *, index: bool | None = None, max_height: str = MAX_HEIGHT) -> str:
    """Every row and column of ``df`` for people, HTML-escaped, in a box that scrolls both ways.

    ``index``: show the index (default: only when it is not a plain range). Index labels are
    repeated on every row, so a row read in the middle of a scrolled box still names its op.
    A column without a single value is left out and named beneath the table, with the notes in
    ``df.attrs["notes"]`` (why values are missing, what a column means).
    """
    empty = [c for c in df.columns if len(df) and df[c].isna().all()]
    notes = [str(note) for note in df.attrs.get("notes", [])]
    explained = " ".join(notes)
    unexplained = [header(c) for c in empty if header(c) not in explained]
    if unexplained:
        notes.append(f"no value recorded (column left out): {', '.join(unexplained)}")
    df = df.drop(columns=empty)
    shown = people(df)
    if index is None:
        index = not isinstance(df.index, pd.RangeIndex)
    numeric = [
        header(c) for c in df.columns if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])
    ]
    styler = shown.style.format(escape="html").format_index(escape="html", axis=0).format_index(escape="html", axis=1)
    styler = styler.set_table_styles(_CSS).set_properties(**TEXT_CELL)
    unbroken = {header("config")}  # a config is read whole: its box scrolls rather than split a field
    long = [c for c in shown.columns if c not in numeric and c not in unbroken and shown[c].str.len().max() > LONG_TEXT]
    if long:
        styler = styler.set_properties(subset=long, **LONG_TEXT_CELL)
    if numeric:
        styler = styler.set_properties(subset=[c for c in numeric if c in shown], **NUMBER_CELL)
    if not index:
        styler = styler.hide(axis="index")
    rows = f"{len(df)} rows" if len(df) != 1 else "1 row"
    foot = "; ".join([rows, *notes])
    return (
        f"<div class='oasr-table' style='max-height:{max_height};max-width:100%;overflow:auto'>"
        f"{styler.to_html(sparse_index=False)}</div><div style='font-size:11px;color:#666'>{html.escape(foot)}</div>"
    )


class Table(pd.DataFrame):
    """A DataFrame in base units that a notebook displays for people (:func:`to_html`).

    Slices, column selections and copies stay Tables, so ``timing[["op", "seconds"]]`` in a
    cell displays the same way.
    """

    @property
    def _constructor(self) -> Callable[..., Table]:
        return Table

    def _repr_html_(self) -> str:
        return to_html(self)
