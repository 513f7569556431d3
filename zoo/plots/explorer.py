"""The attention explorer: one self-contained HTML file to look at a run's attention in a browser.

``write_explorer(path, examples)`` writes ``attention/explorer.html``: plotly's JavaScript and the
page's own few lines are inlined, so the file opens with no network, from disk and in the MLflow
UI's artifact view. For each example the reader picks a *view* (a matrix of weights with a token
per row and per column: the decoder's attention over the source, one layer and head of a
Transformer's self- or cross-attention or the heads' average, one hop of a memory network over the
story's sentences) and sees it two ways:

- the tokens: pointing at a row token (an output token, a hop) shades each column token (source
  token, sentence) by its weight, ``alpha_ij / max_j alpha_ij``; columns marked gold (a story's
  supporting sentences) are underlined;
- the heatmap of the whole matrix (plotly), its hover giving each weight.

An example is a dict ``{"title": str, "key": str (what it shows, the same across runs: the source
sentence, the question; the title when absent), "views": [view, ...]}``; a view is ``{"name": str,
"rows": [str], "columns": [str], "weights": [[float]] (len(rows) x len(columns)), "gold":
[int] (column indices, optional), "gold_cells": [[row, column]] (optional: gold per row, e.g. each
output digit's box or span, outlined in the heatmap and underlined while its row is pointed at),
"background": {"z": [[float]], "x0", "dx", "y0", "dy"} (optional: an image drawn under the weights,
e.g. the digits' pixels under a feature grid)}``. ``explorer_payload`` checks and rounds them;
``side_by_side`` puts several runs' examples together (``python -m zoo.compare --explorer``), which
reads each run's page back with ``read_explorer``.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

EXPLORER = "explorer.html"


def view(name: str, rows: Sequence, columns: Sequence, weights, gold: Optional[Sequence[int]] = None,
         gold_cells: Optional[Sequence[Sequence[int]]] = None, background=None) -> Dict:
    """One view, padding cut: ``rows`` and ``columns`` are token lists (bytes or str; "" pads and is
    dropped from the end), ``weights`` at least ``[len(rows), len(columns)]``; ``background``
    ``[H, W]`` is stretched over the ``len(rows) x len(columns)`` cells."""
    rows = [_text(t) for t in rows]
    columns = [_text(t) for t in columns]
    while rows and rows[-1] == "":
        rows.pop()
    while columns and columns[-1] == "":
        columns.pop()
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 2 or w.shape[0] < len(rows) or w.shape[1] < len(columns):
        raise ValueError(f"view {name!r}: weights of shape {w.shape} for {len(rows)} rows and {len(columns)} columns")
    w = w[:len(rows), :len(columns)]
    out = {"name": name, "rows": rows, "columns": columns,
           "weights": [[round(float(x), 4) for x in row] for row in w]}
    if gold:
        out["gold"] = [int(g) for g in gold if 0 <= int(g) < len(columns)]
    if gold_cells:
        out["gold_cells"] = [[int(r), int(c)] for r, c in gold_cells if 0 <= r < len(rows) and 0 <= c < len(columns)]
    if background is not None:
        z = np.asarray(background, dtype=np.float64)
        dy, dx = len(rows) / z.shape[0], len(columns) / z.shape[1]
        out["background"] = {"z": [[round(float(x), 3) for x in row] for row in z],
                             "x0": -0.5 + dx / 2, "dx": dx, "y0": -0.5 + dy / 2, "dy": dy}
    return out


def _text(token) -> str:
    token = token.decode("utf-8") if isinstance(token, bytes) else str(token)
    return "␣" if token == " " else token


def explorer_payload(examples: Sequence[Mapping], title: str, footnote: str = "") -> Dict:
    """The JSON the page reads: ``{"title", "footnote", "examples": [...]}``, every view checked."""
    checked = []
    for example in examples:
        views = list(example["views"])
        if not views:
            raise ValueError(f"example {example.get('title')!r} has no view")
        for v in views:
            if len(v["weights"]) != len(v["rows"]) or any(len(r) != len(v["columns"]) for r in v["weights"]):
                raise ValueError(f"view {v['name']!r}: weights are not {len(v['rows'])} x {len(v['columns'])}")
        checked.append({"title": str(example["title"]), "key": str(example.get("key", example["title"])),
                        "views": views})
    return {"title": title, "footnote": footnote, "examples": checked}


def write_explorer(path, examples: Sequence[Mapping], title: str = "attention explorer", footnote: str = "") -> str:
    """Writes the self-contained explorer page of ``examples`` (see the module docstring) to
    ``path``; returns ``path``."""
    from plotly.offline import get_plotlyjs

    payload = json.dumps(explorer_payload(examples, title, footnote), ensure_ascii=False)
    page = _PAGE.format(title=html.escape(title), plotly=get_plotlyjs(), script=_SCRIPT,
                        data=payload.replace("</", "<\\/"))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(page, encoding="utf-8")
    return str(path)


def read_explorer(path) -> Dict:
    """The payload (``explorer_payload``) of an explorer page ``write_explorer`` wrote."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.index(_DATA_OPEN) + len(_DATA_OPEN)
    return json.loads(text[start:text.index("</script>", start)])


def side_by_side(runs: Mapping[str, Sequence[Mapping]]) -> List[Dict]:
    """One example list from several runs' (``{label: examples}``): the examples whose key (the
    source sentence, the question) every run has, titled by it, each run's views in turn prefixed
    with its label, in the first run's order."""
    labels = list(runs)
    by_key = {label: {e.get("key", e["title"]): e for e in runs[label]} for label in labels}
    common = [e.get("key", e["title"]) for e in runs[labels[0]]
              if all(e.get("key", e["title"]) in by_key[label] for label in labels)]
    return [{"title": key, "key": key, "views": [{**v, "name": f"{label}: {v['name']}"} for label in labels
                                                 for v in by_key[label][key]["views"]]} for key in common]


_DATA_OPEN = '<script id="data" type="application/json">'


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 1.2em; color: #222; }}
select {{ font-size: 1em; margin-right: 1em; }}
.tokens {{ margin: .6em 0; line-height: 2.1em; }}
.tokens span {{ padding: .15em .3em; margin: .1em; border-radius: .25em; border: 1px solid #ddd; }}
.rows span {{ cursor: pointer; }} .rows span.active {{ outline: 2px solid #d62728; }}
.columns span.gold {{ text-decoration: underline 2px #2ca02c; }}
.label {{ font-size: .8em; color: #666; }} #footnote {{ font-size: .75em; color: #777; }}
</style></head><body>
<h2 id="title"></h2>
<label>example <select id="example"></select></label>
<label>view <select id="view"></select></label>
<div class="label">point at a row token (an output token, a hop) to shade the columns by its weights</div>
<div class="tokens rows" id="rows"></div>
<div class="tokens columns" id="columns"></div>
<div id="heatmap" style="width: 100%; height: 460px;"></div>
<p id="footnote"></p>
<script>{plotly}</script>
<script id="data" type="application/json">{data}</script>
<script>{script}</script>
</body></html>
"""

_SCRIPT = """
const DATA = JSON.parse(document.getElementById("data").textContent);
const $ = (id) => document.getElementById(id);
$("title").textContent = DATA.title;
$("footnote").textContent = DATA.footnote;
DATA.examples.forEach((e, i) => $("example").add(new Option(e.title, i)));
function current() { return DATA.examples[+$("example").value].views[+$("view").value]; }
function shade(row) {
  const v = current(), w = v.weights[row], top = Math.max(...w, 1e-9);
  const cells = new Set((v.gold_cells || []).filter(([r, c]) => r === row).map(([r, c]) => c));
  document.querySelectorAll("#rows span").forEach((s, i) => s.classList.toggle("active", i === row));
  document.querySelectorAll("#columns span").forEach((s, j) => {
    s.style.background = "rgba(31, 119, 180, " + (w[j] / top).toFixed(3) + ")";
    s.title = w[j].toFixed(4);
    if (v.gold_cells) s.classList.toggle("gold", cells.has(j));
  });
}
function tokens(id, list, gold) {
  const box = $(id); box.replaceChildren();
  list.forEach((t, i) => {
    const s = document.createElement("span"); s.textContent = t; s.dataset.index = i;
    if (gold && gold.includes(i)) s.classList.add("gold");
    box.appendChild(s);
  });
}
function draw() {
  const v = current();
  tokens("rows", v.rows); tokens("columns", v.columns, v.gold);
  document.querySelectorAll("#rows span").forEach((s, i) => s.addEventListener("mouseenter", () => shade(i)));
  const traces = [];
  if (v.background) traces.push({type: "heatmap", z: v.background.z, x0: v.background.x0, dx: v.background.dx,
                                 y0: v.background.y0, dy: v.background.dy, colorscale: "Greys", reversescale: true,
                                 showscale: false, hoverinfo: "skip"});
  traces.push({type: "heatmap", z: v.weights, colorscale: "Viridis", zmin: 0, opacity: v.background ? 0.6 : 1,
               hovertemplate: "%{customdata}<br>weight %{z:.4f}<extra></extra>",
               customdata: v.weights.map((row, i) => row.map((_, j) => v.rows[i] + " -> " + v.columns[j]))});
  const shapes = (v.gold_cells || []).map(([r, c]) => ({type: "rect", x0: c - 0.5, x1: c + 0.5, y0: r - 0.5,
                                                         y1: r + 0.5, line: {color: "#2ca02c", width: 2}}));
  Plotly.react("heatmap", traces,
               {margin: {l: 140, b: 140, t: 20}, shapes: shapes,
                xaxis: {tickvals: v.columns.map((_, j) => j), ticktext: v.columns.map((c, j) => j + ": " + c)},
                yaxis: {autorange: "reversed", tickvals: v.rows.map((_, i) => i),
                        ticktext: v.rows.map((r, i) => i + ": " + r)}}, {displaylogo: false});
  shade(0);
}
function views() {
  const e = DATA.examples[+$("example").value]; $("view").replaceChildren();
  e.views.forEach((v, i) => $("view").add(new Option(v.name, i)));
  draw();
}
$("example").addEventListener("change", views);
$("view").addEventListener("change", draw);
views();
"""
