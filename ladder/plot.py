"""`roofline ladder plot RESULTS.json -o ladder.png`: TFLOP/s per level against cuBLAS and the roof.

One group of bars per benched shape (shapes that some ladder level ran), one bar per level and one
for cuBLAS, whiskers from the p20/p80 times; a black tick marks the roof for the shape:
min(compute ceiling, HBM ceiling x arithmetic intensity), both ceilings measured in the same run
(the bench's own `ceilings`). matplotlib is imported only when drawing.
"""
from __future__ import annotations

from .bench import gemm_flops, gemm_min_bytes


def ladder_plot_data(res: dict) -> dict:
    """What the picture shows, as numbers: shapes, per-series TFLOP/s (median, p20, p80) and the
    roof per shape."""
    rows = [r for r in res["rows"] if "t_ms_median" in r]
    shapes = []
    for r in rows:
        s = (r["m"], r["n"], r["k"])
        if r["level"] != 0 and s not in shapes:
            shapes.append(s)
    series: dict[str, dict] = {}
    for r in rows:
        s = (r["m"], r["n"], r["k"])
        if s not in shapes:
            continue
        key = "cuBLAS" if r["level"] == 0 else f"L{r['level']} {r['name']}"
        fl = gemm_flops(*s)
        ser = series.setdefault(key, {"level": r["level"], "median": {}, "p20": {}, "p80": {}})
        ser["median"][s] = fl / (r["t_ms_median"] * 1e-3) / 1e12
        ser["p20"][s] = fl / (r["t_ms_p80"] * 1e-3) / 1e12   # slower time -> lower rate
        ser["p80"][s] = fl / (r["t_ms_p20"] * 1e-3) / 1e12
    c = res.get("ceilings", {})
    flops_c = c.get("cublas_bf16_8192", {}).get("flops_s")
    bw_c = c.get("hbm_copy", {}).get("bytes_s")
    roof = {}
    if flops_c and bw_c:
        for s in shapes:
            ai = gemm_flops(*s) / gemm_min_bytes(*s)
            roof[s] = min(flops_c, bw_c * ai) / 1e12
    order = sorted(series, key=lambda k: (series[k]["level"] == 0, series[k]["level"]))
    return {"shapes": shapes, "series": {k: series[k] for k in order}, "roof_tflops": roof,
            "device": res.get("meta", {}).get("device")}


def plot_ladder(res: dict, path) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = ladder_plot_data(res)
    shapes, series = d["shapes"], d["series"]
    n = len(series)
    width = 0.8 / max(n, 1)
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(shapes) + 3), 5))
    cmap = plt.get_cmap("viridis")
    for i, (name, ser) in enumerate(series.items()):
        xs, ys, lo, hi = [], [], [], []
        for j, s in enumerate(shapes):
            if s in ser["median"]:
                xs.append(j - 0.4 + width * (i + 0.5))
                ys.append(ser["median"][s])
                lo.append(ser["median"][s] - ser["p20"][s])
                hi.append(ser["p80"][s] - ser["median"][s])
        color = "#444444" if ser["level"] == 0 else cmap(i / max(n - 1, 1))
        ax.bar(xs, ys, width, yerr=[lo, hi], label=name, color=color, capsize=2)
    for j, s in enumerate(shapes):
        if s in d["roof_tflops"]:
            ax.hlines(d["roof_tflops"][s], j - 0.45, j + 0.45, colors="black", linewidth=2,
                      label="roof (same-run ceilings)" if j == 0 else None)
    ax.set_xticks(range(len(shapes)))
    ax.set_xticklabels(["x".join(map(str, s)) for s in shapes], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("TFLOP/s (median, p20-p80 whiskers)")
    ax.set_title(f"GEMM ladder vs cuBLAS, bf16 TN, {d['device'] or ''}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(str(path), dpi=120)
    plt.close(fig)
    return d
