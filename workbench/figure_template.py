"""The one Plotly template of the workbench's figures (Play, Reward lab, Runs, the report).

:data:`LIGHT` is the look of Plotly's ``plotly_white`` for the 2-D charts drawn here (layout and
axes), without the rest of that template (its defaults for every trace type, colour scales, 3-D,
polar and map axes; bars lose a 0.5 px white outline). The full template is
~6 KB of JSON that Plotly deep-copies and validates into each figure it is named in (~45 ms per
figure here, on an idle core) and that the browser re-reads on every update; this one is ~0.7 KB
and costs a few ms.
"""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

__all__ = ["LAYOUT_KEYS", "LIGHT"]

#: The layout entries of ``plotly_white`` that 2-D charts read.
LAYOUT_KEYS = (
    "annotationdefaults",
    "autotypenumbers",
    "colorway",
    "font",
    "hoverlabel",
    "hovermode",
    "paper_bgcolor",
    "plot_bgcolor",
    "shapedefaults",
    "title",
    "xaxis",
    "yaxis",
)
_WHITE = pio.templates["plotly_white"]
LIGHT = go.layout.Template(layout={key: _WHITE.layout[key] for key in LAYOUT_KEYS})
