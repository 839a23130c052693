"""`roofline calc --html calc.html`: the roofline calculator as one self-contained page.

No server, no network, no CDN: CSS and JavaScript are inline, and every roof the page uses is
embedded at generation time from peaks/*.yaml through `roofline.core.calc.page_data`
(the page has no number of its own). The JavaScript repeats the formulas of roofline/core/calc.py:
bytes = (MK + KN + MN) x bytes/element, t_compute = 2MNK / peak, t_HBM = bytes / BW, wall = the
longer bar, AI = FLOPs / bytes against ridge = peak / BW, crossover N* = peak (3 b) / (2 BW).
tests/test_calc_browser.py loads the page in headless Chromium and compares what it shows with
the CLI's numbers.

Element ids (each number also in a `data-value` attribute at full precision, SI units):
n, t_compute, t_hbm, t_wall, bound, ai, ridge, ai_over_ridge, crossover, attainable, peak, bw;
selectors device, dtype, roof, out (C dtype; "same" = the A/B dtype), slider size.
The URL hash sets the initial state: #device=h200&dtype=bf16&roof=table&out=same&n=4096.
"""
from __future__ import annotations

import json

from roofline.core.calc import page_data
from roofline.peaks import DTYPE_BYTES

SLIDER_MIN = 500    # slider value v <-> N = round(2^(v/100)): 2^5 = 32 ...
SLIDER_MAX = 1500   # ... 2^15 = 32768; exact powers of two at multiples of 100

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>roofline calculator</title>
<style>
body { font-family: system-ui, sans-serif; margin: 24px; max-width: 900px; color: #222; }
h1 { font-size: 20px; margin: 0 0 4px 0; }
.sub { color: #666; font-size: 13px; margin-bottom: 16px; }
.controls { display: flex; flex-wrap: wrap; gap: 16px; align-items: center; margin-bottom: 12px; }
.controls label { font-size: 14px; }
#size { width: 420px; }
.bars { margin: 16px 0; }
.row { display: flex; align-items: center; margin: 6px 0; }
.row .name { width: 110px; font-size: 14px; }
.row .track { flex: 1; background: #f0f0f0; height: 26px; position: relative; }
.row .fill { height: 26px; }
.row .val { width: 120px; text-align: right; font-variant-numeric: tabular-nums; font-size: 14px; }
#bar_compute { background: #1f77b4; }
#bar_hbm { background: #ff7f0e; }
.wall { outline: 3px solid #d62728; }
table.nums { border-collapse: collapse; font-size: 14px; }
table.nums td { padding: 3px 12px 3px 0; }
table.nums td.v { font-variant-numeric: tabular-nums; font-weight: 600; }
.verdict { font-size: 16px; margin: 10px 0; }
.aiaxis { position: relative; height: 40px; background: linear-gradient(90deg, #fde0c5, #d5e8f8); margin: 26px 0 24px 0; }
.aiaxis .mark { position: absolute; top: 0; width: 3px; height: 40px; }
.aiaxis .lab { position: absolute; top: 42px; font-size: 12px; white-space: nowrap; transform: translateX(-50%); }
#ai_mark { background: #222; }
#ridge_mark { background: #d62728; }
.src { color: #666; font-size: 12px; margin-top: 20px; }
</style>
</head>
<body>
<h1>Roofline calculator: GEMM C[N,N] = A[N,N] B[N,N]</h1>
<div class="sub">t_compute = 2N&sup3; / peak; t_HBM = the three N&times;N matrices (A, B, C once each) / HBM bandwidth; the wall-clock bound is the longer bar.
Roofs embedded from the project's peak tables when this page was generated (<span id="gen_src"></span>).</div>
<div class="controls">
  <label>device <select id="device"></select></label>
  <label>dtype <select id="dtype"></select></label>
  <label>roofs <select id="roof"></select></label>
  <label>C dtype <select id="out"></select></label>
</div>
<div class="controls">
  <label for="size">size N</label>
  <input type="range" id="size" min="__SLIDER_MIN__" max="__SLIDER_MAX__" step="1" value="1200">
  <span>N = <b id="n" data-value=""></b></span>
</div>
<div class="bars">
  <div class="row"><div class="name">t_compute</div><div class="track"><div class="fill" id="bar_compute"></div></div><div class="val" id="t_compute" data-value=""></div></div>
  <div class="row"><div class="name">t_HBM</div><div class="track"><div class="fill" id="bar_hbm"></div></div><div class="val" id="t_hbm" data-value=""></div></div>
</div>
<div class="verdict">wall-clock bound <b id="t_wall" data-value=""></b>: <b id="bound" data-value=""></b>-bound</div>
<div>arithmetic intensity against the ridge (log scale, 1 to 10<sup>5</sup> FLOP/byte)</div>
<div class="aiaxis" id="aiaxis">
  <div class="mark" id="ridge_mark"></div><div class="lab" id="ridge_lab"></div>
  <div class="mark" id="ai_mark"></div><div class="lab" id="ai_lab" style="top:-18px"></div>
</div>
<table class="nums">
<tr><td>arithmetic intensity (FLOP/byte)</td><td class="v" id="ai" data-value=""></td></tr>
<tr><td>ridge = peak / BW (FLOP/byte)</td><td class="v" id="ridge" data-value=""></td></tr>
<tr><td>AI / ridge</td><td class="v" id="ai_over_ridge" data-value=""></td></tr>
<tr><td>crossover N* (t_compute = t_HBM)</td><td class="v" id="crossover" data-value=""></td></tr>
<tr><td>attainable (TFLOP/s)</td><td class="v" id="attainable" data-value=""></td></tr>
<tr><td>compute roof (TFLOP/s)</td><td class="v" id="peak" data-value=""></td></tr>
<tr><td>memory roof (TB/s)</td><td class="v" id="bw" data-value=""></td></tr>
</table>
<div class="src" id="src"></div>
<script type="application/json" id="roofline-data">__DATA__</script>
<script>
(function () {
  "use strict";
  var DATA = JSON.parse(document.getElementById("roofline-data").textContent);
  var $ = function (id) { return document.getElementById(id); };
  function g3(x) { return String(Number(x.toPrecision(3))); }
  function g4(x) { return String(Number(x.toPrecision(4))); }
  function fmtTime(t) {
    if (t >= 1) return g3(t) + " s";
    if (t >= 1e-3) return g3(t * 1e3) + " ms";
    if (t >= 1e-6) return g3(t * 1e6) + " us";
    return g3(t * 1e9) + " ns";
  }
  function fill(sel, items, want) {
    sel.innerHTML = "";
    items.forEach(function (it) {
      var o = document.createElement("option"); o.value = it[0]; o.textContent = it[1];
      if (it[0] === want) o.selected = true;
      sel.appendChild(o);
    });
    if (!items.some(function (it) { return it[0] === want; }) && items.length) sel.value = items[0][0];
  }
  function sizeN() { return Math.round(Math.pow(2, Number($("size").value) / 100)); }
  function set(id, text, value) { var e = $(id); e.textContent = text; e.setAttribute("data-value", String(value)); }
  function pos(ai) {  // log10 position on the 1 .. 1e5 axis, in percent
    var p = Math.log10(Math.max(ai, 1)) / 5 * 100; return Math.min(Math.max(p, 0), 100);
  }
  function refreshDtypes(wantDtype, wantRoof) {
    var dev = DATA.devices[$("device").value];
    var dts = Object.keys(dev.dtypes);
    fill($("dtype"), dts.map(function (d) { return [d, d]; }), wantDtype || $("dtype").value || "bf16");
    refreshRoofs(wantRoof);
  }
  function refreshRoofs(wantRoof) {
    var dt = DATA.devices[$("device").value].dtypes[$("dtype").value];
    var rs = DATA.roof_choices.filter(function (r) { return r in dt.roofs; });
    fill($("roof"), rs.map(function (r) { return [r, r]; }), wantRoof || $("roof").value || "table");
  }
  function update() {
    var dev = DATA.devices[$("device").value];
    var dt = dev.dtypes[$("dtype").value];
    var r = dt.roofs[$("roof").value];
    var n = sizeN(), b = dt.elem_bytes;
    var c = $("out").value === "same" ? b : DATA.elem_bytes[$("out").value];
    var flops = 2 * n * n * n;
    var bytes = n * n * b + n * n * b + n * n * c;     // A, B, C each cross HBM once
    var tc = flops / r.peak_flops_s, th = bytes / r.hbm_bw_bytes_s;
    var ai = flops / bytes, ridge = r.peak_flops_s / r.hbm_bw_bytes_s;
    var cross = r.peak_flops_s * (2 * b + c) / (2 * r.hbm_bw_bytes_s);
    var wall = Math.max(tc, th), bound = tc >= th ? "compute" : "memory";
    var att = Math.min(r.peak_flops_s, r.hbm_bw_bytes_s * ai);
    set("n", String(n), n);
    set("t_compute", fmtTime(tc), tc);
    set("t_hbm", fmtTime(th), th);
    set("t_wall", fmtTime(wall), wall);
    set("bound", bound, bound);
    set("ai", g4(ai), ai);
    set("ridge", g4(ridge), ridge);
    set("ai_over_ridge", g3(ai / ridge), ai / ridge);
    set("crossover", g4(cross), cross);
    set("attainable", g4(att / 1e12), att);
    set("peak", g4(r.peak_flops_s / 1e12) + " (" + r.peak_flops_kind + ")", r.peak_flops_s);
    set("bw", g4(r.hbm_bw_bytes_s / 1e12) + " (" + r.hbm_bw_kind + ")", r.hbm_bw_bytes_s);
    $("bar_compute").style.width = (100 * tc / wall) + "%";
    $("bar_hbm").style.width = (100 * th / wall) + "%";
    $("bar_compute").className = "fill" + (bound === "compute" ? " wall" : "");
    $("bar_hbm").className = "fill" + (bound === "memory" ? " wall" : "");
    $("ai_mark").style.left = pos(ai) + "%"; $("ai_lab").style.left = pos(ai) + "%";
    $("ai_lab").textContent = "AI " + g4(ai);
    $("ridge_mark").style.left = pos(ridge) + "%"; $("ridge_lab").style.left = pos(ridge) + "%";
    $("ridge_lab").textContent = "ridge " + g4(ridge);
    $("src").textContent = dev.device + ": " + dev.table_file;
    writeHash(n);
  }
  var hashTimer = null;
  function writeHash(n) {  // debounced: browsers throttle rapid same-document navigations
    if (hashTimer) clearTimeout(hashTimer);
    hashTimer = setTimeout(function () {
      history.replaceState(null, "", "#device=" + $("device").value + "&dtype=" + $("dtype").value +
        "&roof=" + $("roof").value + "&out=" + $("out").value + "&n=" + n);
    }, 250);
  }
  var want = {};
  location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
    var p = kv.split("="); if (p.length === 2) want[p[0]] = decodeURIComponent(p[1]);
  });
  var devs = Object.keys(DATA.devices);
  fill($("device"), devs.map(function (d) { return [d, DATA.devices[d].device]; }), want.device || DATA.default_device);
  refreshDtypes(want.dtype || DATA.default_dtype, want.roof || "table");
  fill($("out"), [["same", "same as A, B"]].concat(Object.keys(DATA.elem_bytes).map(function (d) { return [d, d]; })),
       want.out || "same");
  if (want.n && Number(want.n) > 0) {
    $("size").value = String(Math.round(100 * Math.log2(Number(want.n))));
  }
  $("gen_src").textContent = DATA.generated_from;
  $("device").addEventListener("change", function () { refreshDtypes(); update(); });
  $("dtype").addEventListener("change", function () { refreshRoofs(); update(); });
  $("roof").addEventListener("change", update);
  $("out").addEventListener("change", update);
  $("size").addEventListener("input", update);
  update();
})();
</script>
</body>
</html>
"""


def render_page(default_device: str = "h200", default_dtype: str = "bf16", directory=None) -> str:
    """The page as one string, the roofs of every table embedded as JSON."""
    data = page_data(directory)
    if not data["devices"]:
        raise ValueError("no peak tables to embed")
    data["default_device"] = default_device if default_device in data["devices"] else sorted(data["devices"])[0]
    data["default_dtype"] = default_dtype
    data["generated_from"] = "peaks/*.yaml"
    data["elem_bytes"] = dict(DTYPE_BYTES)
    blob = json.dumps(data, sort_keys=True).replace("</", "<\\/")
    return (_TEMPLATE.replace("__DATA__", blob)
            .replace("__SLIDER_MIN__", str(SLIDER_MIN)).replace("__SLIDER_MAX__", str(SLIDER_MAX)))


def slider_value(n: int) -> int:
    """The slider position that shows size n (n a power of two gives it exactly)."""
    import math

    return round(100 * math.log2(n))
