"""``python -m ember.bench`` runs the benchmark harness."""

import sys

from ember.bench.harness import main

sys.exit(main())
