"""Console scripts.

``sr-dist`` is a Hydra app over the configs shipped in ``sr_dist/conf`` (so it works from an
installed wheel, not only from the source tree).
"""

from __future__ import annotations

import hydra
from omegaconf import DictConfig, OmegaConf


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def _run(cfg: DictConfig) -> None:
    # Orchestration (Ray agents, shared evaluator, Parquet results) arrives with the main-job
    # issue; until then the app resolves and prints its configuration.
    print(OmegaConf.to_yaml(cfg, resolve=True), end="")


def main() -> None:
    _run()


if __name__ == "__main__":
    main()
