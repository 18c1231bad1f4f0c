"""One rank of strata.train(..., ranks=N), started by `strata run` as `python -c "<COMMAND>"
JOB.json` (COMMAND: sets the dlopen flags, then calls cli()). Trains its part of the job as train_gpt would (the same GptJob), stopping after the step
in flight on SIGTERM/SIGINT, agreed over the ranks."""

from __future__ import annotations

import json
import os
import signal
import sys


# Open MPI's components find libmpi's symbols only when it was loaded globally: the flags are set
# before the package (and its module) is imported.
COMMAND = ("import os, sys; sys.setdlopenflags(os.RTLD_NOW | os.RTLD_GLOBAL); "
           "from strata._rank import cli; cli()")


def main(spec_path: str) -> int:
    from . import _strata
    from ._stop import StopRequest
    from ._train import drive

    spec = json.loads(open(spec_path, encoding="utf-8").read())
    job = _strata.Job(json.dumps(spec["document"]), spec["source"], spec["metrics"],
                      spec["log_dir"], spec["init_from"], spec["save_initial"], spec["threads"])
    lead = job.rank == 0

    def on_step(record: dict, step: dict) -> None:
        if lead and step["print"]:
            print(step["line"], flush=True)

    stop = StopRequest()
    signal.signal(signal.SIGTERM, stop._handler)
    with stop:
        stopped = drive(job, stop, on_step)
    report = job.finish(not stopped)
    if lead:
        print(report, end="", flush=True)
    _strata.flush()
    return 0


def cli() -> None:
    from .errors import StrataError

    try:
        sys.exit(main(sys.argv[1]))
    except StrataError as e:
        print(f"strata: {e}", file=sys.stderr, flush=True)
        sys.exit(1)
