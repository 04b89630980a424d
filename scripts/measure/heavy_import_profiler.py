#!/usr/bin/env python3
"""A profiler with heavy imports and a light analysis, for `causalbench measure
profiler-cost` (issue 36): it imports what Holistic Trace Analysis imports (HTA itself,
pandas, networkx, plotly), then answers each view as examples/profilers/minimal.py does.
What it costs beyond minimal.py is the imports, paid once per process.

    heavy_import_profiler.py MINIMAL.py HTA_FILE VIEW.json OUT.json    (per view)
    heavy_import_profiler.py MINIMAL.py HTA_FILE --serve               (batch form)

Declared `serve[hta]:` instead of `serve:` (baselines/PROTOCOL.md, "Warm start"), its
servers are forked from the harness's zygote, which has imported HTA's stack already:
the imports below then find it in `sys.modules`.

HTA_FILE is a file in the directory HTA is installed in (baselines/hta/setup-hta.sh's
stamp file, say): the sandbox grants the directory of a file argument (PROTOCOL.md).
"""
import json
import os
import runpy
import sys


def main(argv):
    if len(argv) not in (4, 5):
        sys.stderr.write(__doc__)
        return 2
    minimal = runpy.run_path(argv[1])
    sys.path.insert(0, os.path.dirname(os.path.abspath(argv[2])))
    import warnings

    warnings.simplefilter("ignore")
    import hta.trace_analysis  # noqa: F401  (pandas, numpy, networkx, plotly with it)
    import networkx  # noqa: F401
    import pandas  # noqa: F401

    if argv[3] == "--serve":
        return minimal["serve"]()
    with open(argv[4], "w") as f:
        json.dump(minimal["explain"](argv[3]), f)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
