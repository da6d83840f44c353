"""``sr-dist``: the Hydra app that runs a search (``python -m sr_dist`` is the same).

The configs live in ``sr_dist/conf`` (package data, so an installed wheel has them too): the
groups' defaults and checks in ``sr_dist/conf/schema.py`` (stored in Hydra's ConfigStore when
``sr_dist.conf`` is imported), the primary ``config.yaml``, ``evaluator/gpu.yaml`` and the model
presets in YAML.
``sr-dist --help`` lists the config groups, the common overrides and the resolved config;
``sr-dist --multirun KEY=A,B ...`` runs a sweep, one run after another in this process, all
writing into the same ``results.path`` and sharing the local Ray cluster the first one started
(a run whose ``ray`` settings differ starts a new one).

Quiet by default: the console shows sr-dist's own lines, Ray's and JAX's go to the job log
under the results path; ``sr-dist --verbose`` (or ``hydra.verbose=true``) shows them too.

Exit status: 0 when the run searched (stopping on a budget included), 1 when it failed or every
agent failed, 2 for a configuration error, 128+N after signal N (130 for Ctrl-C). In a sweep the
worst status wins, and an interrupt stops the sweep.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn

import hydra
from omegaconf import DictConfig

import sr_dist.conf  # noqa: F401 - stores the config groups' defaults in Hydra's ConfigStore

__all__ = ["exit_at_once", "main", "run_from_config"]

PROG = "sr-dist"
_exit_code = 0


def run_from_config(cfg: DictConfig, base_dir: str | None = None, *,
                    keep_cluster: bool = False) -> int:
    """Run one search and return the process exit status; errors become one line on stderr.
    ``keep_cluster``: a sweep's runs share the local Ray cluster the first one started."""
    from sr_dist.search import SearchError, SettingsError, run_search

    try:
        summary = run_search(cfg, base_dir=base_dir, keep_cluster=keep_cluster)
    except SettingsError as exc:
        print(f"{PROG}: configuration error: {exc}", file=sys.stderr)
        return 2
    except SearchError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    if summary.all_agents_failed:
        print(f"{PROG}: every agent failed; see the agent lines above", file=sys.stderr)
    return summary.exit_code


def _scrub_recorded_secrets(cfg: DictConfig) -> None:
    """Hydra records the config and the overrides before the app runs. ``build_model`` refuses a
    secret typed into ``model.*`` (keys belong in the variable named by ``api_key_env``), but the
    value must not stay in Hydra's record either: overwrite it there."""
    from hydra.core.hydra_config import HydraConfig

    from sr_dist.models.options import SECRET_KEYS

    model = cfg.get("model") or {}
    values = {str(v) for k, v in model.items() if str(k).lower() in SECRET_KEYS and v not in (None, "")}
    if not values:
        return
    hydra_cfg = HydraConfig.get()
    folders = {Path(hydra_cfg.runtime.output_dir)}
    if hydra_cfg.mode is not None and hydra_cfg.mode.name == "MULTIRUN":
        folders.add(Path(hydra_cfg.sweep.dir))
    for folder in folders:
        for path in folder.rglob("*.yaml"):
            text = path.read_text(encoding="utf-8")
            scrubbed = text
            for value in values:
                scrubbed = scrubbed.replace(value, "***")
            if scrubbed != text:
                path.write_text(scrubbed, encoding="utf-8")


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _run(cfg: DictConfig) -> None:
    global _exit_code
    from hydra.core.hydra_config import HydraConfig
    from hydra.utils import get_original_cwd

    _scrub_recorded_secrets(cfg)
    mode = HydraConfig.get().mode
    code = run_from_config(cfg, base_dir=get_original_cwd(),
                           keep_cluster=mode is not None and mode.name == "MULTIRUN")
    _exit_code = max(_exit_code, code)
    if code >= 128:  # interrupted: end the process (and a sweep) now
        sys.exit(code)


def _take_verbose(argv: list[str]) -> bool:
    """Remove ``--verbose``/``-v`` from ``argv`` (Hydra does not know them); whether one was
    there."""
    found = [a for a in argv[1:] if a in ("--verbose", "-v")]
    argv[1:] = [a for a in argv[1:] if a not in ("--verbose", "-v")]
    return bool(found)


def main() -> None:
    """Console entry point. ``--verbose`` shows Ray's and JAX's lines on the console too (by
    default they go to the job log, sr_dist/search/quiet.py)."""
    import logging
    import os

    from sr_dist.search.quiet import VERBOSE_ENV

    if _take_verbose(sys.argv):
        os.environ[VERBOSE_ENV] = "1"
    logging.captureWarnings(True)  # Python warnings become records: the job log, not stderr
    _run()
    exit_at_once(_exit_code)


def exit_at_once(code: int) -> NoReturn:
    """End the process without tearing down its modules one by one (sympy's, pyarrow's, Ray's:
    0.6 s of a 30-s run's wrap-up on 2 cores, against 0.14 s this way). What Python's own exit
    does that matters is done first: the other non-daemon threads are joined, the ``atexit``
    handlers run, the log handlers flushed and closed, stdout and stderr flushed."""
    import atexit
    import logging
    import os
    import threading

    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing left to write
                pass
    os._exit(code)


if __name__ == "__main__":
    main()
