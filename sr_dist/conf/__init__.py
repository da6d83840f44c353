"""sr-dist's Hydra configuration: the config groups' schema and the YAML built on it.

Importing this package stores the groups' defaults (:mod:`sr_dist.conf.schema`) in Hydra's
ConfigStore, so every compose of ``sr_dist.conf`` (the ``sr-dist`` app, ``initialize_config_module``)
finds ``search/default``, ``evaluator/cpu`` and the rest; the YAML files here are the primary
``config.yaml``, the ``evaluator/gpu`` variant, the model presets and Hydra's logging.
"""

from sr_dist.conf.record_dir import register_resolver
from sr_dist.conf.schema import register

register()
register_resolver()
