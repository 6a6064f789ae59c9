"""Where a build's progress is drawn: a terminal line, or a notebook output.

    bar = open_bar(label, fraction)    # fraction in [0, 1], or None: no bar
    bar.update(label, fraction)
    bar.close(label, fraction)         # the final state

In a terminal, tqdm redraws one line with carriage returns and, for a second
bar at the same time, moves the cursor up and down (ESC [A). A notebook
output area understands neither: two builds side by side (the kernel library
and the op binding run in two threads) left blank lines and garbled text.
So in a notebook each build gets its own display output, replaced in place
through an IPython display handle (`update_display`): text/html with a
<progress> element for the front end, text/plain without any control
character for everything else (nbconvert, a saved notebook, a text
front end). It needs no widget library, and the final state ("done after
3.2 s") stays in the cell, saved with the notebook.
"""
from __future__ import annotations

import html
import sys
import warnings

_BAR_WIDTH = 20  # characters of the text/plain bar


def in_notebook() -> bool:
    """True inside a Jupyter kernel (where output goes to a cell)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def open_bar(label: str, fraction: float | None):
    return NotebookBar(label, fraction) if in_notebook() else TerminalBar(label, fraction)


class NotebookBar:
    """One output in the running cell, replaced in place."""

    def __init__(self, label: str, fraction: float | None):
        from IPython.display import display

        self.handle = display(self._bundle(label, fraction), raw=True, display_id=True)

    def update(self, label: str, fraction: float | None) -> None:
        self.handle.update(self._bundle(label, fraction), raw=True)

    def close(self, label: str, fraction: float | None) -> None:
        self.update(label, fraction)

    @staticmethod
    def _bundle(label: str, fraction: float | None) -> dict:
        text, bar = label, ""
        if fraction is not None:
            filled = round(max(0.0, min(1.0, fraction)) * _BAR_WIDTH)
            text += " |" + "\u2588" * filled + " " * (_BAR_WIDTH - filled) + "|"
            bar = f"<progress value='{fraction:.3f}' max='1' style='width:12em;margin-right:.6em'></progress>"
        markup = f"<div class='kreg-progress' style='font-family:monospace'>{bar}{html.escape(label)}</div>"
        return {"text/plain": text, "text/html": markup}


class TerminalBar:
    """tqdm's line on stderr (several at once stack, as tqdm does)."""

    def __init__(self, label: str, fraction: float | None):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from tqdm import tqdm
        self.with_bar = fraction is not None
        # The label carries the numbers; the bar only the fraction.
        bar_format = "{desc} |{bar}|" if self.with_bar else "{desc}"
        self.bar = tqdm(total=1.0 if self.with_bar else None, desc=label, bar_format=bar_format,
                        leave=False, dynamic_ncols=True)
        self._set(fraction)

    def _set(self, fraction: float | None) -> None:
        if self.with_bar and fraction is not None:
            self.bar.n = fraction

    def update(self, label: str, fraction: float | None) -> None:
        self._set(fraction)
        self.bar.set_description_str(label, refresh=False)
        self.bar.refresh()

    def close(self, label: str, fraction: float | None) -> None:
        self._set(fraction)
        self.bar.set_description_str(label, refresh=True)
        self.bar.close()
