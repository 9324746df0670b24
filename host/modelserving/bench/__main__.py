"""``python -m modelserving.bench``: every benchmark (``modelserving.bench.render.main``)."""

from modelserving.bench.render import main

main()
