"""What registry.tune returns: the table (config x shape), the winners, what
was dropped and why, and a plot, as a sweep's result is shown."""
from __future__ import annotations

from registry.errors import UsageError

COLUMNS = ["op", "dtype", "shape", "bucket", "config", "passed", "median_us", "gbps", "speedup", "chosen", "note"]


class TuneResult:
    """The table (`.table`, a pandas DataFrame: one row per config x shape),
    the winners, what was dropped and why, and how long each phase took."""

    def __init__(self, kernel, device, rows, winners, dropped, build_seconds, seconds, table_path, compiled):
        self.kernel, self.device, self.rows, self.winners = kernel, device, rows, winners
        self.dropped, self.build_seconds, self.seconds = dropped, build_seconds, seconds
        self.table_path, self.compiled = table_path, compiled
        self._table = None

    @property
    def table(self):
        """The rows as a pandas DataFrame (pandas is imported on first use: a cached tune needs none)."""
        if self._table is None:
            import pandas as pd

            self._table = pd.DataFrame(self.rows, columns=COLUMNS)
        return self._table

    def caption(self) -> str:
        configs = len({r["config"] for r in self.rows})
        return (f"tune {self.kernel} on {self.device}: {configs} configs, {len(self.dropped)} dropped, "
                f"{self.compiled} compiled, builds {self.build_seconds:.2f} s, total {self.seconds:.2f} s")

    def _repr_html_(self) -> str:
        import html

        dropped = "".join(f"<li>{html.escape(d)}</li>" for d in self.dropped)
        return (f"<p><b>{html.escape(self.caption())}</b></p>" + (f"<ul>{dropped}</ul>" if dropped else "")
                + self.table.to_html(index=False, na_rep=""))

    def __repr__(self) -> str:
        lines = [self.caption(), *(f"  dropped: {d}" for d in self.dropped)]
        lines += [f"  winner {op} {dtype} {shape}: {config}" for (op, dtype, shape), config in self.winners.items()]
        return "\n".join(lines + [self.table.to_string(index=False)])

    def plot(self, metric: str = "speedup"):
        """`metric` ("speedup", "us" or "gbps") per config, one line per (op, dtype, shape); returns the Figure."""
        import matplotlib.pyplot as plt

        column = {"speedup": "speedup", "us": "median_us", "gbps": "gbps"}.get(metric)
        if column is None:
            raise UsageError(f"metric must be 'speedup', 'us' or 'gbps', not {metric!r}")
        ran = self.table[self.table["median_us"].notna()]
        configs = list(dict.fromkeys(ran["config"]))
        fig, ax = plt.subplots(figsize=(max(6.5, 0.35 * len(configs)), 4))
        for (op, dtype, shape), rows in ran.groupby(["op", "dtype", "shape"], sort=False):
            xs = [configs.index(c) for c in rows["config"]]
            ax.plot(xs, rows[column], marker="o", label=f"{op} {dtype} {shape}")
            chosen = rows[rows["chosen"] == True]  # noqa: E712 (a pandas mask)
            ax.scatter([configs.index(c) for c in chosen["config"]], chosen[column], s=120, facecolors="none",
                       edgecolors="black")
        if metric == "speedup":
            ax.axhline(1.0, linestyle="--", color="gray", label="default config")
        ax.set_xticks(range(len(configs)))
        ax.set_xticklabels(configs, rotation=70, ha="right", fontsize=7)
        ax.set_ylabel({"speedup": "speed-up over the default", "us": "median time (us)", "gbps": "GB/s"}[metric])
        ax.set_title(self.caption(), fontsize=9)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        plt.close(fig)
        return fig
