"""A `Table` (numbers in `data`, formatted cells in `display`) and its formats: Markdown padded for a
terminal (numbers right-aligned, narrowed to a width with the dropped columns named), booktabs LaTeX that
pdflatex typesets, CSV whose numbers round-trip, and JSON. Every text format prints a missing value as
`—`, never NaN and never blank. Which tables exist and what they hold is analysis.tables.
"""

from __future__ import annotations

import html
import json
import re
import unicodedata
from dataclasses import dataclass

import numpy as np
import pandas as pd

FORMATS = ("md", "csv", "latex", "json")
MISSING = "—"  # how every text format prints a missing value (never NaN, never blank)
TERMINAL_WIDTH = 120  # the default width of terminal tables (`--wide` shows every column)
LATEX_REQUIRES = r"% requires \usepackage{booktabs}"


@dataclass
class Table:
    name: str
    title: str
    data: pd.DataFrame
    display: pd.DataFrame
    note: str = ""
    lead: str = ""  # one line a reader must see before the numbers (printed right under the title)
    keep: tuple[str, ...] = ()  # columns a narrowed terminal table keeps first (then `_priority`'s order)


def _is_missing(cell: str) -> bool:
    return cell.strip().lower() in ("", "nan", "none", "<na>", "—")


_NUMERIC_CELL = re.compile(r"^\s*[-+−>]?\s*\d|^\s*\[\s*[-+−]?\d")


def numeric_columns(df: pd.DataFrame) -> list[bool]:
    """Per column: True when every present cell starts with a number (e.g. `62.10 ± 1.20`, `+0.40 [..]`,
    `> 100000`); such columns are right-aligned (Markdown `---:`, LaTeX `r`)."""
    out = []
    for c in df.columns:
        cells = [str(v) for v in df[c] if not _is_missing(str(v))]
        out.append(bool(cells) and all(_NUMERIC_CELL.match(v) for v in cells))
    return out


_NAN_WORD = re.compile(r"(?<![A-Za-z])(nan|NaN)(?![A-Za-z])")


def _cell(v: object) -> str:
    """A display cell with every missing value shown as `—` (never NaN, never an empty cell)."""
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return MISSING
    s = str(v)
    return MISSING if _is_missing(s) else _NAN_WORD.sub(MISSING, s)


def _md(df: pd.DataFrame) -> str:
    """A GitHub pipe table, padded for a terminal: numbers right-aligned (`---:`), missing as `—`."""
    cells = [[_cell(v) for v in row] for row in df.itertuples(index=False)]
    head = [str(c).replace("|", "\\|") for c in df.columns]
    cells = [[v.replace("|", "\\|") for v in row] for row in cells]
    num = numeric_columns(pd.DataFrame(cells, columns=range(len(head)))) if cells else [False] * len(head)
    widths = [max([len(head[i]), 3] + [len(r[i]) for r in cells]) for i in range(len(head))]

    def line(vals: list[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if n else v.ljust(w)
                                 for v, w, n in zip(vals, widths, num, strict=True)) + " |"

    sep = "|" + "|".join(("-" * (w + 1) + ":") if n else ("-" * (w + 2))
                         for w, n in zip(widths, num, strict=True)) + "|"
    return "\n".join([line(head), sep, *(line(r) for r in cells)])


def fit_columns(display: pd.DataFrame, key: list[str], width: int = TERMINAL_WIDTH) -> tuple[pd.DataFrame, list[str]]:
    """The `key` columns (in priority order, the last dropped first) that fit `width` characters as a Markdown
    table, and the names of the columns left out (shown with `--wide`)."""
    keep = [c for c in key if c in display.columns]
    while len(keep) > 2 and max(map(len, _md(display[keep]).splitlines()), default=0) > width:
        keep.pop()
    shown = [c for c in display.columns if c in keep]
    return display[shown], [c for c in display.columns if c not in keep]


_LATEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                  "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
_LATEX_UNICODE = {"Δ": r"$\Delta$", "±": r"$\pm$", "≥": r"$\geq$", "≤": r"$\leq$", "—": "---", "–": "--",
                  "−": "$-$", "σ": r"$\sigma$", "χ": r"$\chi$", "τ": r"$\tau$", "ρ": r"$\rho$", "μ": r"$\mu$",
                  "α": r"$\alpha$", "²": r"\textsuperscript{2}", "×": r"$\times$", "→": r"$\rightarrow$",
                  "‡": r"\ddag{}", "†": r"\dag{}", "⚠": "(!)", "·": r"$\cdot$", "…": r"\ldots{}", "≈": r"$\approx$",
                  "✓": "yes", "✗": "no", "‰": r"\textperthousand{}", "°": r"$^\circ$"}


def latex_escape(text: str) -> str:
    """Text pdflatex typesets with the default fonts: LaTeX specials escaped, known Unicode mapped to
    math/text commands, anything else reduced to ASCII (never a raw non-ASCII byte in the output). A minus
    sign before a number (`-0.40`, `[-1.2, ...`) is set in math mode (`$-$0.40`), never as a text hyphen."""
    out = []
    text = str(text)
    for i, ch in enumerate(text):
        if ch == "-" and i + 1 < len(text) and (text[i + 1].isdigit() or text[i + 1] == ".") \
                and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] in "_-")):
            out.append("$-$")
        elif ch in _LATEX_SPECIAL:
            out.append(_LATEX_SPECIAL[ch])
        elif ch in _LATEX_UNICODE:
            out.append(_LATEX_UNICODE[ch])
        elif ch.isascii():
            out.append(ch)
        else:
            out.append(unicodedata.normalize("NFKD", ch).encode("ascii", "ignore").decode() or "?")
    return "".join(out)


def _latex(t: Table) -> str:
    disp = t.display
    cells = [[_cell(v) for v in row] for row in disp.itertuples(index=False)]
    num = numeric_columns(pd.DataFrame(cells, columns=range(disp.shape[1]))) if cells else [False] * disp.shape[1]
    caption = latex_escape(f"{t.title}. {t.lead}" if t.lead else t.title)
    lines = [LATEX_REQUIRES]
    if t.lead:
        lines.append("% " + latex_escape(t.lead))
    lines += [r"\begin{table}", r"\centering"]
    if disp.shape[1] > 8:  # wide tables (the paired one): smaller type and tighter columns
        lines += [r"\scriptsize", r"\setlength{\tabcolsep}{3pt}"]
    lines += [rf"\caption{{{caption}}}", rf"\label{{tab:{t.name}}}",
              r"\begin{tabular}{" + "".join("r" if n else "l" for n in num) + "}", r"\toprule",
              " & ".join(latex_escape(c) for c in disp.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(latex_escape(v) for v in row) + r" \\" for row in cells]
    lines += [r"\bottomrule", r"\end{tabular}"]
    if t.note:
        lines.append(r"\par\smallskip{\footnotesize " + latex_escape(t.note) + "}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def table_json(t: Table) -> dict:
    """One table as a JSON-safe dict: its numbers (`Table.data`) with missing values as null."""
    from analysis.budget import machine_columns  # per-seed cells as lists

    data = machine_columns(t.data)
    rows = json.loads(data.to_json(orient="records", double_precision=15)) if not data.empty else []
    return {"name": t.name, "title": t.title, "lead": t.lead, "note": t.note, "rows": rows}


def _shortest(v: float) -> float:
    """`v` without binary noise: rounded to 12 significant digits, so Python's shortest repr prints it
    (53.120000000000005 -> 53.12); no score or statistic here carries more than 12 meaningful digits."""
    return float(f"{v:.12g}") if np.isfinite(v) else v


def clean_csv(data: pd.DataFrame) -> str:
    """CSV whose numbers round-trip as written: a float column whose values are all whole numbers (counts,
    steps, seeds) is written as integers, other floats without binary noise; missing stays empty."""
    df = data.copy()
    for c in df.columns:
        if df[c].dtype.kind != "f":
            continue
        vals = df[c].to_numpy(float)
        finite = vals[np.isfinite(vals)]
        if len(finite) and np.all(finite == np.round(finite)) and np.all(np.abs(finite) < 2**53) \
                and not np.isinf(vals).any():
            df[c] = pd.array([None if np.isnan(v) else int(v) for v in vals], dtype="Int64")
        else:
            df[c] = [_shortest(v) for v in vals]
    return df.to_csv(index=False)


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False))


def _priority(display: pd.DataFrame) -> list[str]:
    """Columns of a display table in the order they are kept when it must be narrowed: the text columns that
    name a row (policy, reference, scope), n, the Δ/verdict columns (the answer), then the group keys (model
    before campaign and regime), then the rest in order; the last are dropped first."""
    cols = list(display.columns)
    num = dict(zip(cols, numeric_columns(display), strict=True)) if len(display) else dict.fromkeys(cols, False)
    groups = [c for c in ("model", "campaign", "regime", "step") if c in cols]
    names = [c for c in cols if not num[c] and c not in groups and not str(c).startswith(("Δ", "verdict", "evidence"))]
    n = [c for c in cols if c in ("n", "n_configs", "groups")]
    key = [c for c in cols if str(c).startswith(("Δ", "verdict"))]
    return list(dict.fromkeys(names + n + key + groups + cols))


def fit_table(t: Table, width: int = TERMINAL_WIDTH) -> tuple[str, list[str]]:
    """One table as terminal Markdown no wider than `width`: title, lead and note wrapped, columns dropped
    from the end of `_priority` until the table fits; returns the text and the dropped columns' names."""
    if t.display.empty:
        return render_table(t, "md"), []
    shown, hidden = fit_columns(t.display, list(dict.fromkeys([*t.keep, *_priority(t.display)])), width)
    lead = f"**{_wrap(t.lead, width - 4)}**\n\n" if t.lead else ""
    note = f"\n\n{_wrap('_' + t.note + '_', width)}" if t.note else ""
    return f"## {t.title}\n\n{lead}{_md(shown)}{note}\n", hidden


def render_table(t: Table, fmt: str) -> str:
    """One table as Markdown (title heading + lead + note), LaTeX (booktabs table env with caption), CSV (the
    numbers only, no comment lines, pandas-readable) or JSON (the numbers, title and notes as fields)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")
    if fmt == "csv":
        from analysis.budget import machine_columns  # per-seed cells as numbers joined with ';'

        return clean_csv(machine_columns(t.data, sep=";")) if not t.data.empty else ""
    if fmt == "json":
        return json.dumps(table_json(t), indent=1) + "\n"
    if fmt == "md":
        body = _md(t.display) if not t.display.empty else f"_{t.note or 'empty'}_"
        note = f"\n\n_{t.note}_" if t.note and not t.display.empty else ""
        lead = f"**{t.lead}**\n\n" if t.lead else ""
        return f"## {t.title}\n\n{lead}{body}{note}\n"
    if t.display.empty:
        return f"{LATEX_REQUIRES}\n% {latex_escape(t.title)}: {latex_escape(t.note)}\n"
    return _latex(t)


def render_tables(tables: list[Table], fmt: str) -> str:
    """Several tables as one document (md, latex) or one JSON object; CSV holds one table per file, so
    several tables in CSV are refused here (callers write one file per table instead)."""
    if fmt == "csv":
        if len(tables) != 1:
            raise ValueError("CSV holds one table; write one file per table")
        return render_table(tables[0], fmt)
    if fmt == "json":
        return json.dumps({"tables": [table_json(t) for t in tables]}, indent=1) + "\n"
    return "\n".join(render_table(t, fmt) for t in tables)
def html_table(display: pd.DataFrame) -> str:
    """A table for the report: missing values as — (never NaN), text left-aligned and kept on one line (model
    names never wrap mid-name), numbers right-aligned, inside a box that scrolls sideways when too wide."""
    cells = [[_cell(v) for v in row] for row in display.itertuples(index=False)]
    num = numeric_columns(pd.DataFrame(cells, columns=range(display.shape[1]))) if cells else [False] * display.shape[1]
    cls = [' class="num"' if n else "" for n in num]
    head = "".join(f"<th{c}>{html.escape(str(h))}</th>" for h, c in zip(display.columns, cls, strict=True))
    body = "".join("<tr>" + "".join(f"<td{c}>{html.escape(v)}</td>" for v, c in zip(row, cls, strict=True))
                   + "</tr>" for row in cells)
    return f'<div class="scroll"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


