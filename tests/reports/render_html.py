#!/usr/bin/python3
"""The HTML report, rendered by a real browser.

Runs a tiny real sweep with `--html` (and `scalescope report FILE --html` on its JSON), then
opens the page in headless Chromium:
  * --dump-dom: the DOM Chromium built holds every chart's <svg> with a <title> and shapes
    inside it, the number of bars / cells / markers the points call for, a dashed projection,
    and nothing that loads from elsewhere;
  * --screenshot: a PNG that is not blank (many colours, among them the NVTX phase colours of
    the bars and the heat map's green);
  * a second sweep with --noise-scale and --profile-layers: its page has the noise-scale figure,
    a marker per point of more than one device, a sentence under it per point, and the table
    of the slowest layers with a cell per point (the first page has none of these);
  * a third sweep to a target (--until-accuracy): its page has the time-to-target figure, a
    group of bars (or n/a) per point of more than one device, and a sentence per point;
  * a fourth sweep with --precision fp32,bf16: a section per precision and one comparing them;
  * at a viewport 1280 px wide (a laptop), the page is no wider than the viewport: wide tables
    scroll inside their own box (measured on a copy of the page with a script that writes the
    widths into the DOM; the page itself has no script).

Usage: render_html.py SCALESCOPE [--keep DIR]   (DIR keeps the page and the screenshot)
Exit status 77 (ctest's SKIP_RETURN_CODE) when chromium is not installed. Standard library
only: the PNG is decoded with zlib.
"""

import argparse
import html.parser
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import zlib

SKIP = 77
CHROMIUM_TIMEOUT_S = 120
SWEEP_TIMEOUT_S = 300

failures = []


def ok(what):
    print(f"ok: {what}")


def check(condition, what):
    if condition:
        ok(what)
    else:
        failures.append(what)
        print(f"FAIL: {what}")


def run(cmd, timeout, **kwargs):
    """Runs cmd in its own process group, killing the whole group on timeout: Chromium forks
    helpers that would otherwise outlive it and hold ctest."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, **kwargs)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        sys.exit(f"FAIL: timed out after {timeout} s: {' '.join(cmd)}")
    if proc.returncode != 0:
        sys.exit(f"FAIL: exit status {proc.returncode}: {' '.join(cmd)}\n"
                 f"{out.decode(errors='replace')[-3000:]}\n{err.decode(errors='replace')[-3000:]}")
    return out.decode(errors="replace")


def chromium(binary, profile, *args):
    return run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--hide-scrollbars", f"--user-data-dir={profile}", *args],
               CHROMIUM_TIMEOUT_S)


# ---------------------------------------------------------------------------------------
# The DOM Chromium dumped.

SHAPES = {"rect", "circle", "line", "polyline", "path", "polygon"}
VOID = {"meta", "br", "hr", "img", "input", "link"}


class Chart:
    def __init__(self, attrs):
        self.attrs = attrs
        self.kind = attrs.get("data-chart", "")
        self.model = attrs.get("data-model", "")
        self.title = ""
        self.shapes = {}
        self.marked = {}  # data-* attribute name → elements carrying it
        self.dashed_projections = 0
        self.projections = 0
        self.noise_points = []  # data-noise-point of each marker, in order
        self.target_points = []  # data-target-point of each group, in order


class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.charts = []
        self.current = None  # the chart being read
        self.depth = 0  # elements open inside it
        self.in_title = False
        self.external = []  # attributes that would load something from elsewhere
        self.scripts = 0
        self.section_model = ""  # the model of the <section> being read
        self.compression_effects = {}  # model → <p data-compression-effect> under its chart
        self.noise_notes = []  # (model, attributes) of each <p data-noise-point>
        self.target_notes = []  # (model, attributes) of each <p data-target-point>
        self.layer_tables = 0  # <table data-layers>
        self.layer_rows = []  # per <tr data-layer>: the data-point of each of its cells

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        for name in ("src", "href", "srcset", "poster", "data"):
            value = a.get(name)
            if value is not None and name in a and not value.startswith("#"):
                self.external.append(f"<{tag} {name}={value!r}>")
        if "url(" in a.get("style", ""):
            self.external.append(f"<{tag} style={a['style']!r}>")
        if tag == "script":
            self.scripts += 1
        if tag == "section":
            self.section_model = a.get("data-model", "")
        if tag == "p" and "data-noise-point" in a and self.current is None:
            self.noise_notes.append((self.section_model, a))
        if tag == "p" and "data-target-point" in a and self.current is None:
            self.target_notes.append((self.section_model, a))
        if "data-compression-effect" in a:
            model = self.section_model
            self.compression_effects[model] = self.compression_effects.get(model, 0) + 1
        if tag == "table" and "data-layers" in a:
            self.layer_tables += 1
        if tag == "tr" and "data-layer" in a:
            self.layer_rows.append([])
        if tag == "td" and "data-point" in a and self.layer_rows:
            self.layer_rows[-1].append(a["data-point"])
        if tag == "svg" and self.current is None:
            self.current = Chart(a)
            self.charts.append(self.current)
            self.depth = 0
            return
        if self.current is None:
            return
        if tag not in VOID:
            self.depth += 1
        if tag == "title" and self.depth == 1:
            self.in_title = True
        if tag in SHAPES:
            self.current.shapes[tag] = self.current.shapes.get(tag, 0) + 1
        for name in a:
            if name.startswith("data-"):
                self.current.marked[name] = self.current.marked.get(name, 0) + 1
        if "data-noise-point" in a:
            self.current.noise_points.append(a["data-noise-point"])
        if tag == "g" and "data-target-point" in a:
            self.current.target_points.append(a["data-target-point"])
        if tag == "polyline" and a.get("data-projected") == "true":
            self.current.projections += 1
            if a.get("stroke-dasharray"):
                self.current.dashed_projections += 1

    def handle_endtag(self, tag):
        if self.current is None:
            return
        if tag == "svg" and self.depth == 0:
            self.current = None
            return
        if tag == "title":
            self.in_title = False
        if tag not in VOID:
            self.depth -= 1

    def handle_data(self, data):
        if self.current is not None and self.in_title:
            self.current.title += data


# ---------------------------------------------------------------------------------------
# PNG decoding (8-bit RGB or RGBA, not interlaced: what Chromium writes).

def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode_png(data):
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG (bad signature)")
    pos = 8
    idat = bytearray()
    header = None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    width, height, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (2, 6) or interlace != 0:
        raise ValueError(f"unsupported PNG: depth {depth}, colour type {color_type}, "
                         f"interlace {interlace}")
    bpp = 3 if color_type == 2 else 4
    stride = width * bpp
    raw = zlib.decompress(bytes(idat))
    rows = []
    previous = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        kind = raw[start]
        row = bytearray(raw[start + 1:start + 1 + stride])
        if kind == 1:
            for i in range(bpp, stride):
                row[i] = (row[i] + row[i - bpp]) & 0xFF
        elif kind == 2:
            row = bytearray((r + p) & 0xFF for r, p in zip(row, previous))
        elif kind == 3:
            for i in range(stride):
                left = row[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + ((left + previous[i]) >> 1)) & 0xFF
        elif kind == 4:
            for i in range(stride):
                left = row[i - bpp] if i >= bpp else 0
                up_left = previous[i - bpp] if i >= bpp else 0
                row[i] = (row[i] + paeth(left, previous[i], up_left)) & 0xFF
        elif kind != 0:
            raise ValueError(f"row {y}: unknown filter {kind}")
        rows.append(bytes(row))
        previous = row
    return width, height, bpp, rows


def colours_of(rows, bpp):
    seen = {}
    for row in rows:
        for i in range(0, len(row), bpp):
            c = row[i:i + 3]
            seen[c] = seen.get(c, 0) + 1
    return seen


def has_colour(seen, hex_colour, tolerance=3, at_least=50):
    want = bytes.fromhex(hex_colour.lstrip("#"))
    n = 0
    for c, count in seen.items():
        if all(abs(c[k] - want[k]) <= tolerance for k in range(3)):
            n += count
    return n >= at_least


# ---------------------------------------------------------------------------------------

LAPTOP_WIDTH = 1280

WIDTH_PROBE = """<script>
const wide = Array.from(document.querySelectorAll(".wide"));
document.body.setAttribute("data-viewport", String(window.innerWidth));
document.body.setAttribute("data-page", String(document.documentElement.scrollWidth));
document.body.setAttribute("data-boxes", String(Math.max(0, ...wide.map(b => b.clientWidth))));
document.body.setAttribute("data-scrolling",
                           String(wide.filter(b => b.scrollWidth > b.clientWidth).length));
</script>"""


def escaped(text):
    """As the page escapes text (reports/html/svg.cpp)."""
    for plain, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"),
                          ("'", "&#39;")):
        text = text.replace(plain, entity)
    return text


def check_page_width(browser, tmp, page):
    """Opens the page at LAPTOP_WIDTH px and checks that it does not scroll sideways: its width
    and every table box's are at most the viewport's."""
    probe = os.path.join(tmp, "width-probe.html")
    with open(page, encoding="utf-8") as f:
        source = f.read()
    with open(probe, "w", encoding="utf-8") as f:
        f.write(source.replace("</body>", WIDTH_PROBE + "</body>"))
    dom = chromium(browser, os.path.join(tmp, "profile"), f"--window-size={LAPTOP_WIDTH},900",
                   "--dump-dom", "file://" + probe)
    found = {k: int(v) for k, v in re.findall(r'data-(viewport|page|boxes|scrolling)="(\d+)"',
                                              dom)}
    if len(found) != 4:
        check(False, f"the width probe ran ({found})")
        return
    check(found["viewport"] == LAPTOP_WIDTH, f"the viewport is {LAPTOP_WIDTH} px ({found})")
    check(found["page"] <= found["viewport"],
          f"the page fits {LAPTOP_WIDTH} px: {found['page']} px wide, "
          f"{found['scrolling']} table(s) scrolling in their own box")
    check(found["boxes"] <= found["viewport"], f"every table box fits ({found['boxes']} px)")


def sweep_page(scalescope, browser, tmp, name, options, kind, what):
    """Runs a dense-100 sweep with `options`, writing NAME.json and NAME.html, and reads the
    page's DOM from Chromium. Returns the page's path, its DOM and its one chart of `kind` (None,
    after a failed check, when there is not exactly one)."""
    report = os.path.join(tmp, f"{name}.json")
    page = os.path.join(tmp, f"{name}.html")
    run([scalescope, "sweep", "--models", "dense-100", "--threads", "1", "--oversubscribe",
         *options, "-o", report, "--html", page, "-q"], SWEEP_TIMEOUT_S, cwd=tmp)
    dom = Dom()
    dom.feed(chromium(browser, os.path.join(tmp, "profile"), "--dump-dom", "file://" + page))
    charts = [c for c in dom.charts if c.kind == kind]
    check(len(charts) == 1 and charts[0].model == "dense-100" and charts[0].title.strip(),
          f"{what}: one titled {kind} figure ({len(charts)})")
    return page, dom, charts[0] if len(charts) == 1 else None


def check_noise_page(scalescope, browser, tmp):
    """Sweeps with --noise-scale and checks the page's noise-scale figure and the sentences
    under it. Returns the page's path."""
    # One and more devices: a noise scale for the 2- and 4-device points, and the one-device
    # point for their statistical efficiency. dense-100's gradient is far from all noise at
    # its start, so B_noise is positive and bounded.
    page, dom, c = sweep_page(scalescope, browser, tmp, "noise",
                              ["--devices", "cpu:1,2,4", "--batch", "8", "--repeats", "2",
                               "--steps", "20", "--max-warmup-steps", "4", "--noise-scale",
                               "--profile-layers"],
                              "noise-scale", "--noise-scale")
    points = ["cpu:1, batch 8/device", "cpu:2, batch 8/device", "cpu:4, batch 8/device"]
    check(dom.layer_tables == 1 and len(dom.layer_rows) >= 2
          and all(row == points for row in dom.layer_rows),
          f"--profile-layers: a table of the layers, a cell per point in each row {dom.layer_rows}")
    if c is None:
        return page
    want = ["cpu:2, batch 8/device", "cpu:4, batch 8/device"]
    check(c.noise_points == want, f"a marker per point of more than one device {c.noise_points}")
    for name in ("data-b-noise", "data-b-noise-low", "data-b-noise-high", "data-ci"):
        check(c.marked.get(name, 0) == len(want), f"noise-scale markers carry {name} {c.marked}")
    check(c.marked.get("data-diagonal", 0) == 1, "the diagonal global batch = B_noise")
    check([a.get("data-noise-point") for _, a in dom.noise_notes] == want
          and all(m == "dense-100" for m, _ in dom.noise_notes),
          f"a sentence per marker under the figure {dom.noise_notes}")
    for _, a in dom.noise_notes:
        b = float(a.get("data-b-noise", "nan"))
        check(b > 0, f"{a.get('data-noise-point')}: data-b-noise {b} > 0")
    with open(page, encoding="utf-8") as f:
        notes = re.findall(r'<p class="note" data-noise-point=[^>]*>([^<]*)</p>', f.read())
    check(len(notes) == len(want) and all("B_noise" in n and "in time to a target" in n
                                          for n in notes),
          f"the sentences give B_noise and the time-to-target speedup {notes}")
    return page


def sixteen_bit_sweep(scalescope):
    """(precision, devices) of a 16-bit sweep here: bf16 on CPU devices, or where this CPU has
    no bf16 kernels (`devices` says why), fp16 on `sim` devices, which emulate it."""
    devices = json.loads(run([scalescope, "devices", "--json"], 60))
    why = devices["cpu"]["precisions"]["refused"].get("bf16")
    if not why:
        return "bf16", "cpu:1,2"
    print(f"fp16 on sim devices for the precision page: bf16 here: {why}")
    return "fp16", "sim:1,2"


def check_precision_page(scalescope, browser, tmp):
    """Sweeps fp32 and a 16-bit precision and checks the page: a section per precision, and one
    that compares them with a bar per point in its phases chart and a table row per point.
    Returns the page's path."""
    report = os.path.join(tmp, "precision.json")
    page = os.path.join(tmp, "precision.html")
    sixteen, devices = sixteen_bit_sweep(scalescope)
    run([scalescope, "sweep", "--models", "dense-100", "--threads", "1", "--oversubscribe",
         "--devices", devices, "--batch", "8", "--repeats", "1", "--steps", "3",
         "--max-warmup-steps", "4", "--precision", f"fp32,{sixteen}", "-o", report, "--html",
         page, "-q"], SWEEP_TIMEOUT_S, cwd=tmp)
    dom = Dom()
    dom.feed(chromium(browser, os.path.join(tmp, "profile"), "--dump-dom", "file://" + page))
    phases = {c.model: c.marked.get("data-bar", 0) for c in dom.charts if c.kind == "phases"}
    check(phases == {"dense-100": 2, f"dense-100 in {sixteen}": 2,
                     "dense-100: precisions compared": 4},
          f"--precision fp32,{sixteen}: a phases chart per precision and one comparing them "
          f"{phases}")
    with open(page, encoding="utf-8") as f:
        rows = f.read().count("<tr data-precision=")
    check(rows == 4, f"the comparison's table has a row per point ({rows})")
    return page


def check_target_page(scalescope, browser, tmp):
    """Sweeps to a target accuracy and checks the page's time-to-target figure and the
    sentences under it. Returns the page's path."""
    # dense-100 on synthetic data reaches 30% within an epoch on one and two devices, so the
    # two-device point has a speedup against the one-device point.
    page, dom, c = sweep_page(scalescope, browser, tmp, "target",
                              ["--devices", "cpu:1,2", "--batch", "128", "--repeats", "1",
                               "--until-accuracy", "0.3", "--max-epochs", "1", "--eval-every",
                               "10"], "time-to-target", "--until-accuracy")
    if c is None:
        return page
    two = "cpu:2, batch 128/device"
    check(c.target_points == [two], f"a group per point of more than one device {c.target_points}")
    check(c.marked.get("data-ideal", 0) == 1, f"the ideal over the group {c.marked}")
    want = ["cpu:1, batch 128/device", two]
    check([a.get("data-target-point") for _, a in dom.target_notes] == want
          and all(m == "dense-100" for m, _ in dom.target_notes),
          f"a sentence per point under the figure {dom.target_notes}")
    with open(page, encoding="utf-8") as f:
        source = f.read()
    check("<figcaption>Time to accuracy 0.3 " in source, "the caption names the target")
    notes = re.findall(r'<p class="note" data-target-point=[^>]*>([^<]*)</p>', source)
    check(len(notes) == 2 and all("accuracy 0.3" in n for n in notes),
          f"the sentences name the target {notes}")
    # Both points reach 30% at their first evaluation as a rule; should one not, its group
    # shows n/a and its sentence says how many runs reached the target instead.
    if all(a.get("data-reached") == "1/1" for _, a in dom.target_notes) and len(notes) == 2:
        check(c.marked.get("data-target-bar", 0) == 2 and c.marked.get("data-speedup", 0) == 1,
              f"two bars (hardware, time to target) {c.marked}")
        check("time-to-target speedup" in notes[1] and "hardware" in notes[1]
              and "statistical" in notes[1],
              f"the two-device sentence splits its speedup {notes[1]!r}")
    else:
        check(c.marked.get("data-missing", 0) == 1 and "no speedup" in notes[-1],
              f"a point short of the target: n/a and a sentence that says why {notes}")
    return page


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scalescope")
    parser.add_argument("--keep", help="copy the page and the screenshot here")
    args = parser.parse_args()
    args.scalescope = os.path.abspath(args.scalescope)

    browser = os.environ.get("CHROMIUM") or shutil.which("chromium")
    if browser is None:
        print("SKIP: chromium is not installed, so the HTML report is not rendered here "
              "(install it with `apt-get install chromium`, or run scripts/setup.sh)")
        return SKIP

    with tempfile.TemporaryDirectory(prefix="scalescope_html_") as tmp:
        report = os.path.join(tmp, "report.json")
        page = os.path.join(tmp, "report.html")
        again = os.path.join(tmp, "again.html")
        # Two models, one batch, one and two CPU devices, two bucket caps, with and without
        # gradient compression: every chart, a projection (cifar-cnn's buckets differ in size,
        # so the all-reduce model can be fitted), a waterfall each, exposed all-reduce against
        # bucket cap (per compression), efficiency with and without compression (per cap).
        compressions = ["none", "fp16"]
        run([args.scalescope, "sweep", "--models", "dense-100,cifar-cnn", "--devices", "cpu:1,2",
             "--batch", "8", "--threads", "1", "--oversubscribe", "--repeats", "2", "--steps", "3",
             "--max-warmup-steps", "4", "--bucket-cap-mb", "0.5,25",
             "--grad-compression", ",".join(compressions), "-o", report, "--html", page,
             "-q"], SWEEP_TIMEOUT_S, cwd=tmp)
        check(os.path.getsize(page) > 10000, f"sweep --html wrote the page ({os.path.getsize(page)} B)")
        out = run([args.scalescope, "report", report, "--html", again], SWEEP_TIMEOUT_S, cwd=tmp)
        check("HTML report written to" in out and os.path.exists(again),
              "report FILE --html writes the page too")
        with open(page, encoding="utf-8") as f:
            source = f.read()
        with open(again, encoding="utf-8") as f:
            source_again = f.read()
        charts_of = lambda text: sorted(re.findall(r'data-chart="([^"]+)"', text))
        check(charts_of(source) == charts_of(source_again),
              "both pages hold the same charts")

        profile = os.path.join(tmp, "profile")
        url = "file://" + page
        dom_text = chromium(browser, profile, "--dump-dom", url)
        dom = Dom()
        dom.feed(dom_text)
        check("<main>" in dom_text or "<main" in dom_text, "Chromium rendered the page's DOM")
        kinds = sorted(c.kind for c in dom.charts)
        expected = sorted(["speedup", "efficiency-heatmap", "phases", "waterfall", "buckets",
                           "compression"] * 2)
        check(kinds == expected, f"one of each chart per model: {kinds}")
        check(not dom.noise_notes, "no noise-scale sentences without --noise-scale")
        check(not dom.target_notes, "no time-to-target sentences without a target")
        check(dom.layer_tables == 0, "no table of layers without --profile-layers")
        for c in dom.charts:
            shapes = sum(c.shapes.values())
            check(c.title.strip() != "" and shapes > 0,
                  f"{c.kind} of {c.model}: titled '{c.title.strip()}', {shapes} shapes {c.shapes}")
        # The charts of points show one point per device count and batch (the uncompressed
        # one of the default caps); the bucket and compression charts the others.
        for c in dom.charts:
            if c.kind == "phases":
                check(c.marked.get("data-bar", 0) == 2, f"phases of {c.model}: a bar per point")
            if c.kind == "efficiency-heatmap":
                check(c.marked.get("data-cell", 0) == 2, f"heat map of {c.model}: a cell per point")
            if c.kind == "speedup":
                check(c.marked.get("data-point", 0) == 2,
                      f"speedup of {c.model}: a marker per point")
                check(c.marked.get("data-ideal", 0) == 1, f"speedup of {c.model}: the ideal line")
            if c.kind == "waterfall":
                check(c.marked.get("data-step", 0) == 7, f"waterfall of {c.model}: 7 steps")
            if c.kind == "buckets":
                n = len(compressions)
                check(c.marked.get("data-bucket", 0) == 2 * n and c.marked.get("data-best", 0) == n,
                      f"buckets of {c.model}: a marker per cap and compression, the best ringed")
            if c.kind == "compression":
                # Two caps, so two groups of a bar per setting: each has its efficiency.
                bars = len(compressions) * 2
                check(c.marked.get("data-compression-bar", 0) == bars
                      and c.marked.get("data-compression", 0) == bars
                      and c.marked.get("data-efficiency", 0) == bars
                      and c.marked.get("data-missing", 0) == 0,
                      f"compression of {c.model}: a bar with its efficiency per setting and cap "
                      f"{c.marked}")
        for model in ("dense-100", "cifar-cnn"):
            # One conclusion per compressed setting and cap.
            conclusions = dom.compression_effects.get(model, 0)
            check(conclusions == (len(compressions) - 1) * 2,
                  f"{model}: the compression conclusions under its chart ({conclusions})")
        # A projection is drawn (dashed) only from a fit that explains the times, and on CPU
        # devices only to counts whose threads fit the cores: otherwise the page says why.
        with open(report, encoding="utf-8") as f:
            communication = {c["model"]: c for c in json.load(f)["communication"]}
        cnn = [c for c in dom.charts if c.kind == "speedup" and c.model == "cifar-cnn"]
        projected = any(s["projections"] for s in communication["cifar-cnn"]["series"])
        if projected:
            check(len(cnn) == 1 and cnn[0].projections == 1 and cnn[0].dashed_projections == 1,
                  "cifar-cnn's projection is drawn, dashed")
        else:
            note = communication["cifar-cnn"]["projection_note"]
            check(len(cnn) == 1 and cnn[0].projections == 0 and note
                  and escaped(note[0].upper() + note[1:]) in source,
                  f"cifar-cnn: no projection drawn, and the page says why ({note!r})")
        check(not dom.external, f"nothing loads from elsewhere {dom.external}")
        check(dom.scripts == 0, "no script")

        shot = os.path.join(tmp, "report.png")
        chromium(browser, profile, f"--screenshot={shot}", "--window-size=1200,3000", url)
        with open(shot, "rb") as f:
            png = f.read()
        check(len(png) > 0, f"screenshot written ({len(png)} B)")
        width, height, bpp, rows = decode_png(png)
        check((width, height) == (1200, 3000), f"screenshot is 1200x3000 ({width}x{height})")
        seen = colours_of(rows, bpp)
        check(len(seen) > 50, f"screenshot is not blank: {len(seen)} distinct colours")
        # The bars' NVTX colours (backward blue, forward green) and the heat map's 100% green:
        # the charts were drawn, not only the page around them.
        for name, colour in (("backward", "#0072b2"), ("forward", "#009e73"),
                             ("efficiency 100%", "#2e9e55")):
            check(has_colour(seen, colour), f"the screenshot shows {name} ({colour})")

        check_page_width(browser, tmp, page)

        noise_page = check_noise_page(args.scalescope, browser, tmp)
        target_page = check_target_page(args.scalescope, browser, tmp)
        precision_page = check_precision_page(args.scalescope, browser, tmp)

        if args.keep:
            os.makedirs(args.keep, exist_ok=True)
            for path in (page, shot, noise_page, target_page, precision_page):
                shutil.copy(path, args.keep)
            ok(f"kept the page and screenshot in {args.keep}")

    if failures:
        print(f"{len(failures)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
