"""``exit_at_once`` (the console script's last step) skips the module teardown but keeps what a
normal exit does that matters: the exit status, non-daemon threads finished, ``atexit``
handlers run, log records and stdout written."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = textwrap.dedent("""
    import atexit, logging, sys, threading, time
    from pathlib import Path
    from sr_dist.cli import exit_at_once

    out = Path(sys.argv[1])
    atexit.register(lambda: (out / "atexit").write_text("ran"))
    def late():
        time.sleep(0.3)
        (out / "thread").write_text("finished")
    threading.Thread(target=late).start()
    handler = logging.FileHandler(out / "job.log")
    logging.getLogger("sr_dist.test").addHandler(handler)
    logging.getLogger("sr_dist.test").warning("the last record")
    sys.stdout.write("no newline, still buffered")
    exit_at_once(3)
""")


def test_exit_at_once_keeps_the_status_threads_handlers_logs_and_output(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 3, done.stderr[-2000:]
    assert done.stdout == "no newline, still buffered"
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "job.log").read_text() == "the last record\n"
