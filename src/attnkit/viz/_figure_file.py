"""What every image of attnkit.viz does last: write itself to exactly the file asked for.

``Figure.savefig(path)`` appends ``.png`` to a name without a suffix (``--png /dev/full``
wrote ``/dev/full.png``) and the command then said it wrote the name it was given. Here the
image is drawn into memory in the format the suffix names (none: PNG) and written to
``path`` itself, so a write that fails (a full disk, ``/dev/full``, a read-only folder) is an
OSError naming the path, never a success.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure


def save_figure(fig: Figure, path: str | Path, **kwargs: Any) -> Path:
    """Draw ``fig`` in the format of ``path``'s suffix (.png, .svg, .pdf, ...; none: PNG) and
    write it to ``path``; ``kwargs`` go to ``savefig`` (dpi, bbox_inches). Returns the path."""
    out = Path(path)
    kind = out.suffix[1:].lower() or "png"
    buf = io.BytesIO()
    fig.savefig(buf, format=kind, **kwargs)  # an unknown format: matplotlib's ValueError
    try:
        with open(out, "wb") as f:  # a write error surfaces here, at the write or the close
            f.write(buf.getvalue())
    except OSError as err:  # the write and the close name no file: name it
        raise OSError(err.errno, err.strerror or str(err), str(out)) from None
    return out


__all__ = ["save_figure"]
