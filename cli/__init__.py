"""The tvmrepro command line: an HTTP client of the service, plus --local runs."""

import sys

# httpx imports its own command line (pygments, rich's syntax highlighting: 50 ms of every
# command's start) whenever their packages are installed, as here; marked absent before httpx is
# imported, httpx keeps a stub of its `main`, which nothing here calls.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
