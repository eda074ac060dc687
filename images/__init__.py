"""Pinned TVM environments: the pins (environments.toml), the image recipes and the harness."""

from pathlib import Path

IMAGES_DIR = Path(__file__).resolve().parent
ENVIRONMENTS_FILE = IMAGES_DIR / "environments.toml"
HARNESS_DIR = IMAGES_DIR / "harness"
