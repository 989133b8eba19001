"""The README's picture of a report page (``make screenshot``): render a saved JSON document (by
default docs/report-example.json, the `ab --json` of a real run) and photograph the page with
headless Chromium.

    python scripts/report_screenshot.py docs/report.png [--from RESULT.json] [--height 1500]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuperf_rewrite.report.render import load, write_html  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--from", dest="source", type=Path, default=ROOT / "docs" / "report-example.json")
    ap.add_argument("--width", type=int, default=1000)
    ap.add_argument("--height", type=int, default=1500)
    args = ap.parse_args()
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)
    if browser is None:
        print("no Chromium: `make browser` installs Debian's package (as root)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "page.html"
        write_html(page, load(args.source))
        shot = Path(tmp) / "shot.png"
        subprocess.run([browser, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
                        f"--user-data-dir={tmp}/profile", f"--window-size={args.width},{args.height}",
                        f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=120)
        _shrink(shot, args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB) from {args.source}")
    return 0


def _shrink(png: Path, out: Path) -> None:
    """Keep the README's picture small: a palette PNG (matplotlib brings Pillow)."""
    try:
        from PIL import Image
    except ImportError:
        shutil.copyfile(png, out)
        return
    with Image.open(png) as im:
        im.convert("RGB").quantize(colors=128).save(out, optimize=True)


if __name__ == "__main__":
    raise SystemExit(main())
