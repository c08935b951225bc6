"""Layout defects of a drawn matplotlib figure, found with matplotlib's own geometry.

``problems(figure)`` draws the figure once with Agg at its dpi, records every text artist
that was actually drawn (titles, labels, tick labels in view, annotations, legend and table
texts) with its extent in display pixels, and reports:

- **clipped**: a text that reaches past the canvas (the PNG a panel or ``savefig`` writes
  cuts it; a notebook's tight crop makes the figure wider than drawn instead), an axes
  whose frame reaches past it (a spine or a bar cut off), a text of one axes (a tick
  label, an axis label, a title, a note) that runs into the frame of a neighbouring axes
  (whichever is drawn later paints over the other: the bottom row's "pair i" under the
  next panel), and a text cut by its own clip box;
- **legend over data**: a legend box that a line (with its markers), a scatter point or a
  bar of the axes it sits over passes through;
- **legend mismatch**: a legend entry whose colour, line style or marker differs from the
  artist of the same label it stands for (the legend copied a colour the artist no longer
  has, or a proxy was drawn by hand);
- **collision**: two texts that overlap, a text that lies on a drawn marker or point (a
  label that runs into the next point, "GPT-NeoX 20B" into the 2023 dot), or a leader
  line (an annotation's arrow) that runs through another text or crosses another leader
  line;
- **faint**: a text whose colour has a contrast ratio under 3:1 against what is drawn
  under it (WCAG's floor for large text; light tints vanish on a projector).

Independent of the package: only matplotlib's artists, renderer and transforms are used.
"""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation, Text

TOLERANCE_PX = 1.0  # anti-aliasing: a pixel past an edge is not a defect
LEGEND_MARGIN_PX = 3.0  # a line that grazes the frame's rounded corner is not "under" it
MIN_OVERLAP_PX = 2.0  # two texts must overlap by this much both ways to collide
MIN_CONTRAST = 3.0


def _drawn_texts(figure) -> list[tuple[Text, object]]:
    """Draw ``figure`` and return (text, window extent) of every non-empty text drawn."""
    drawn = []
    original = Text.draw

    def recording(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip() and self.figure is not None:
            # the letters' own box (an Annotation's extent also holds its leader line)
            drawn.append((self, Text.get_window_extent(self, renderer)))

    canvas = figure.canvas if isinstance(figure.canvas, FigureCanvasAgg) else \
        FigureCanvasAgg(figure)
    Text.draw = recording
    try:
        canvas.draw()
    finally:
        Text.draw = original
    seen, unique = set(), []
    for text, box in drawn:  # Annotation.draw calls Text.draw: keep one
        if id(text) not in seen:
            seen.add(id(text))
            unique.append((text, box))
    return unique


def _name(text: Text) -> str:
    return repr(text.get_text()[:40])


def _where(figure, axes) -> str:
    if axes is None:
        return "figure"
    title = axes.get_title() or axes.get_title("left")
    return f"axes {figure.axes.index(axes)}" + (f" ({title[:30]!r})" if title else "")


def clipped(figure, texts) -> list[str]:
    frame = figure.bbox
    found = []
    for text, box in texts:
        past = [side for side, beyond in (
            ("left", frame.x0 - box.x0), ("right", box.x1 - frame.x1),
            ("bottom", frame.y0 - box.y0), ("top", box.y1 - frame.y1)) if beyond > TOLERANCE_PX]
        if past:
            found.append(f"clipped: text {_name(text)} reaches past the canvas "
                         f"({', '.join(past)})")
    for axes in figure.axes:
        if not axes.get_visible():
            continue
        box = axes.get_window_extent()
        if (box.x0 < frame.x0 - TOLERANCE_PX or box.x1 > frame.x1 + TOLERANCE_PX
                or box.y0 < frame.y0 - TOLERANCE_PX or box.y1 > frame.y1 + TOLERANCE_PX):
            found.append(f"clipped: {_where(figure, axes)} reaches past the canvas")
    return found + cut_by_axes(figure, texts) + cut_by_clip_box(texts)


def _owners(figure) -> dict:
    """id(text) → the axes it belongs to (its ticks, axis labels, titles, notes and
    legend); a tick label or an axis label does not know its axes itself."""
    owners = {}
    for axes in figure.axes:
        for text in axes.findobj(Text):
            owners.setdefault(id(text), axes)
    return owners


def _overlap(a, b) -> tuple[float, float]:
    return (min(a.x1, b.x1) - max(a.x0, b.x0), min(a.y1, b.y1) - max(a.y0, b.y0))


def cut_by_axes(figure, texts) -> list[str]:
    """Texts of one axes that run into the frame of another: the axes drawn later paints
    its background over them (or they lie on its data). Twin and inset axes, whose frames
    overlap the owner's, are not neighbours."""
    owners = _owners(figure)
    frames = [(axes, axes.get_window_extent()) for axes in figure.axes if axes.get_visible()]
    found = []
    for text, box in texts:
        owner = owners.get(id(text))
        if owner is None:
            continue
        own = owner.get_window_extent()
        for axes, frame in frames:
            if axes is owner or min(_overlap(own, frame)) > 0:
                continue
            width, height = _overlap(box, frame)
            if width > MIN_OVERLAP_PX and height > MIN_OVERLAP_PX:
                found.append(f"clipped: text {_name(text)} of {_where(figure, owner)} runs "
                             f"into {_where(figure, axes)}")
    return found


def cut_by_clip_box(texts) -> list[str]:
    """Texts drawn with clipping on whose letters reach past their clip box."""
    found = []
    for text, box in texts:
        clip = text.get_clip_box() if text.get_clip_on() else None
        if clip is None:
            continue
        if (box.x0 < clip.x0 - TOLERANCE_PX or box.x1 > clip.x1 + TOLERANCE_PX
                or box.y0 < clip.y0 - TOLERANCE_PX or box.y1 > clip.y1 + TOLERANCE_PX):
            found.append(f"clipped: text {_name(text)} is cut by its clip box")
    return found


def _display_path(line: Line2D):
    path = line.get_transform().transform_path(line.get_path())
    vertices = path.vertices
    style = line.get_drawstyle()
    if style.startswith("steps") and len(vertices) > 1:
        x, y = vertices[:, 0], vertices[:, 1]
        if style in ("steps", "steps-pre"):
            xs, ys = np.repeat(x, 2)[:-1], np.repeat(y, 2)[1:]
        elif style == "steps-post":
            xs, ys = np.repeat(x, 2)[1:], np.repeat(y, 2)[:-1]
        else:  # steps-mid
            mid = (x[:-1] + x[1:]) / 2
            xs = np.concatenate([[x[0]], np.repeat(mid, 2), [x[-1]]])
            ys = np.repeat(y, 2)
        vertices = np.column_stack([xs, ys])
    return vertices


def _segments_hit(vertices, box) -> bool:
    """Whether the polyline through ``vertices`` (display px) enters ``box``."""
    from matplotlib.path import Path

    finite = np.isfinite(vertices).all(axis=1)
    for run_start, run in itertools.groupby(range(len(vertices)), key=lambda i: finite[i]):
        if not run_start:
            continue
        points = vertices[list(run)]
        if len(points) == 1:
            if box.contains(*points[0]):
                return True
        elif Path(points).intersects_bbox(box, filled=False):
            return True
    return False


def _shrunk(box, by):
    from matplotlib.transforms import Bbox

    return Bbox.from_extents(box.x0 + by, box.y0 + by, box.x1 - by, box.y1 - by)


def legend_over_data(figure) -> list[str]:
    found = []
    legends = [(axes, axes.get_legend()) for axes in figure.axes if axes.get_legend()]
    legends += [(None, legend) for legend in figure.legends]
    for owner, legend in legends:
        if not legend.get_visible():
            continue
        frame = _shrunk(legend.get_window_extent(), LEGEND_MARGIN_PX)
        for axes in ([owner] if owner is not None else figure.axes):
            if not axes.get_visible():
                continue
            inside = frame.intersection(frame, axes.bbox)
            if inside is None or inside.width <= 0 or inside.height <= 0:
                continue
            for line in axes.lines:
                if not line.get_visible() or len(np.atleast_1d(line.get_xdata())) == 0:
                    continue
                vertices = _display_path(line)
                hit = line.get_linestyle() not in ("None", "none", "", " ") and \
                    _segments_hit(vertices, inside)
                if not hit and line.get_marker() not in (None, "None", "none", "", " "):
                    reach = line.get_markersize() * figure.dpi / 72 / 2
                    grown = _shrunk(inside, -reach)
                    hit = any(grown.contains(x, y) for x, y in vertices
                              if np.isfinite(x) and np.isfinite(y))
                if hit:
                    found.append(f"legend over data: the legend of {_where(figure, owner)} "
                                 f"covers line {line.get_label()!r}")
            for collection in axes.collections:
                if not isinstance(collection, PathCollection) or not collection.get_visible():
                    continue
                points = collection.get_offset_transform().transform(collection.get_offsets())
                if any(inside.contains(x, y) for x, y in points):
                    found.append(f"legend over data: the legend of {_where(figure, owner)} "
                                 f"covers points {collection.get_label()!r}")
            for patch in axes.patches:
                if not isinstance(patch, Rectangle) or not patch.get_visible():
                    continue
                box = patch.get_window_extent()
                spans = box.width >= 0.98 * axes.bbox.width or \
                    box.height >= 0.98 * axes.bbox.height  # axvspan/axhspan: a background
                if not spans and box.overlaps(inside):
                    found.append(f"legend over data: the legend of {_where(figure, owner)} "
                                 f"covers a bar")
                    break
    return found


def _solid(colour) -> tuple:
    return tuple(round(c, 3) for c in to_rgba(colour))


def _looks(artist) -> dict:
    """Colour, line style and marker of a line, points or a patch, comparably."""
    if isinstance(artist, Line2D):
        look = {"colour": _solid(artist.get_color())}
        if artist.get_linestyle() not in ("None", "none", "", " "):
            look["linestyle"] = artist.get_linestyle()
        marker = artist.get_marker()
        if marker not in (None, "None", "none", "", " "):
            look["marker"] = marker
            look["marker colour"] = _solid(artist.get_markerfacecolor())
        return look
    if isinstance(artist, PathCollection):
        faces = artist.get_facecolor()
        return {"colour": _solid(faces[0]) if len(faces) else None}
    if hasattr(artist, "get_facecolor"):
        return {"colour": _solid(artist.get_facecolor())}
    return {}


def legend_mismatch(figure) -> list[str]:
    found = []
    legends = [(axes, axes.get_legend()) for axes in figure.axes if axes.get_legend()]
    legends += [(None, legend) for legend in figure.legends]
    for owner, legend in legends:
        pool = [owner] if owner is not None else figure.axes
        artists = [artist for axes in pool
                   for artist in (*axes.lines, *axes.collections, *axes.patches)]
        handles = getattr(legend, "legend_handles", None) or legend.legendHandles
        for handle, text in zip(handles, legend.get_texts(), strict=False):
            named = [a for a in artists if a.get_label() == text.get_text()]
            if not named:
                continue  # a proxy for something drawn unlabelled: nothing to compare
            artist = named[0]
            if isinstance(artist, Rectangle) and getattr(artist, "_rope_lab_group", None):
                continue
            want, shown = _looks(artist), _looks(handle)
            differ = [key for key in want if key in shown and want[key] != shown[key]]
            if differ:
                found.append(f"legend mismatch: entry {text.get_text()!r} of "
                             f"{_where(figure, owner)} differs from its artist in "
                             f"{', '.join(differ)} ({[shown[k] for k in differ]} vs "
                             f"{[want[k] for k in differ]})")
    return found


def _arrow_vertices(annotation: Annotation):
    patch = annotation.arrow_patch
    if patch is None or not patch.get_visible():
        return None
    path = patch.get_path()
    return patch.get_transform().transform(path.vertices) if len(path.vertices) else None


def _crosses(a, b) -> bool:
    """Whether polylines ``a`` and ``b`` (display px) cross."""
    def orientation(p, q, r):
        return np.sign((q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]))

    for p1, p2 in itertools.pairwise(a):
        for q1, q2 in itertools.pairwise(b):
            if (orientation(p1, p2, q1) * orientation(p1, p2, q2) < 0
                    and orientation(q1, q2, p1) * orientation(q1, q2, p2) < 0):
                return True
    return False


def _markers(figure):
    """(what, centres in display px, radius in px, clip box or None) of every drawn marker:
    a line's markers and a scatter's points, each taken as a disk of its size."""
    px = figure.dpi / 72
    for axes in figure.axes:
        if not axes.get_visible():
            continue
        for line in axes.lines:
            marker = line.get_marker()
            if (not line.get_visible() or marker in (None, "None", "none", "", " ")
                    or line.get_markersize() <= 0 or len(np.atleast_1d(line.get_xdata())) == 0):
                continue
            centres = line.get_transform().transform_path(line.get_path()).vertices
            radius = (line.get_markersize() + line.get_markeredgewidth()) / 2 * px
            yield (f"line {line.get_label()!r}", centres, radius,
                   line.get_clip_box() if line.get_clip_on() else None)
        for collection in axes.collections:
            if not isinstance(collection, PathCollection) or not collection.get_visible():
                continue
            centres = collection.get_offset_transform().transform(collection.get_offsets())
            sizes = np.broadcast_to(np.sqrt(np.asarray(collection.get_sizes(), float)),
                                    (len(centres),)) if len(collection.get_sizes()) else \
                np.zeros(len(centres))
            edge = float(np.max(collection.get_linewidths(), initial=0.0))
            for centre, size in zip(centres, sizes, strict=True):
                yield (f"points {collection.get_label()!r}", centre[None], (size + edge) / 2 * px,
                       collection.get_clip_box() if collection.get_clip_on() else None)


def on_markers(figure, texts) -> list[str]:
    """Texts whose letters' box meets a drawn marker (a disk of the marker's size, less
    TOLERANCE_PX). Legend entries are left to the legend checks."""
    legend_texts = {id(text) for legend in [*figure.legends,
                                            *(axes.get_legend() for axes in figure.axes)]
                    if legend is not None for text in legend.findobj(Text)}
    markers = list(_markers(figure))
    found = []
    for text, box in texts:
        if id(text) in legend_texts:
            continue
        for what, centres, radius, clip in markers:
            centres = centres[np.isfinite(centres).all(axis=1)]
            if clip is not None:  # a marker outside its axes is not drawn
                centres = centres[(centres[:, 0] >= clip.x0) & (centres[:, 0] <= clip.x1)
                                  & (centres[:, 1] >= clip.y0) & (centres[:, 1] <= clip.y1)]
            if not len(centres):
                continue
            dx = np.maximum.reduce([box.x0 - centres[:, 0], np.zeros(len(centres)),
                                    centres[:, 0] - box.x1])
            dy = np.maximum.reduce([box.y0 - centres[:, 1], np.zeros(len(centres)),
                                    centres[:, 1] - box.y1])
            if np.any(np.hypot(dx, dy) < radius - TOLERANCE_PX):
                found.append(f"collision: text {_name(text)} lies on a marker of {what}")
                break
    return found


def collisions(figure, texts) -> list[str]:
    found = []
    for (a, box_a), (b, box_b) in itertools.combinations(texts, 2):
        width, height = _overlap(box_a, box_b)
        if width > MIN_OVERLAP_PX and height > MIN_OVERLAP_PX:
            found.append(f"collision: texts {_name(a)} and {_name(b)} overlap")
    found += on_markers(figure, texts)
    arrows = [(text, _arrow_vertices(text)) for text, _ in texts
              if isinstance(text, Annotation)]
    arrows = [(text, vertices) for text, vertices in arrows if vertices is not None]
    for text, vertices in arrows:
        for other, box in texts:
            if other is text:
                continue
            if _segments_hit(vertices, _shrunk(box, MIN_OVERLAP_PX)):
                found.append(f"collision: the leader line of {_name(text)} runs through "
                             f"text {_name(other)}")
    for (a, va), (b, vb) in itertools.combinations(arrows, 2):
        if _crosses(va, vb):
            found.append(f"collision: the leader lines of {_name(a)} and {_name(b)} cross")
    return found


def contrast_on_white(colour) -> float:
    """WCAG 2 contrast ratio of ``colour`` (alpha blended onto white) against white."""
    r, g, b, alpha = to_rgba(colour)
    rgb = np.array([alpha * c + (1 - alpha) for c in (r, g, b)])
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    luminance = float(linear @ [0.2126, 0.7152, 0.0722])
    return 1.05 / (luminance + 0.05)


def contrast(colour, background) -> float:
    """WCAG 2 contrast ratio between ``colour`` (alpha blended onto ``background``) and
    ``background`` (RGB in 0 … 1)."""
    def luminance(rgb):
        rgb = np.asarray(rgb, float)
        linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
        return float(linear @ [0.2126, 0.7152, 0.0722])

    r, g, b, alpha = to_rgba(colour)
    back = np.asarray(background, float)
    front = alpha * np.array([r, g, b]) + (1 - alpha) * back
    high, low = sorted((luminance(front), luminance(back)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def faint(figure, texts) -> list[str]:
    """Texts whose colour stands out less than MIN_CONTRAST from what is under them (the
    median colour of the drawn pixels in the text's box: the page, a heatmap cell …)."""
    pixels = np.asarray(figure.canvas.buffer_rgba())[..., :3] / 255.0
    height, width = pixels.shape[:2]
    found = []
    for text, box in texts:
        x0, x1 = int(max(box.x0, 0)), int(min(box.x1, width))
        y0, y1 = int(max(height - box.y1, 0)), int(min(height - box.y0, height))
        if x1 <= x0 or y1 <= y0:
            continue
        background = np.median(pixels[y0:y1, x0:x1].reshape(-1, 3), axis=0)
        ratio = contrast(text.get_color(), background)
        if ratio < MIN_CONTRAST:
            found.append(f"faint: text {_name(text)} has contrast {ratio:.1f}:1 on what is "
                         f"under it (under {MIN_CONTRAST:g}:1)")
    return found


def problems(figure) -> list[str]:
    """Every defect above in ``figure`` (drawn once, at its own dpi), one line each."""
    texts = _drawn_texts(figure)
    return [*clipped(figure, texts), *legend_over_data(figure), *legend_mismatch(figure),
            *collisions(figure, texts), *faint(figure, texts)]
