"""cluster/: the launcher YAML passes Ray's own validation, the RayJob is well formed, and
submit.sh builds a correct `ray job submit` command and refuses to run without a token."""

from __future__ import annotations

import copy
import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import jsonschema
import pytest
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER = Path(__file__).resolve().parents[2] / "cluster"


def _launcher() -> dict:
    return yaml.safe_load((CLUSTER / "ray-cluster.yaml").read_text())


# --- Ray cluster launcher ----------------------------------------------------------------------

def test_launcher_yaml_passes_rays_validation():
    config = prepare_config(_launcher())  # what `ray up` does before validating
    validate_config(config)
    types = config["available_node_types"]
    assert config["head_node_type"] == "head"
    assert types["gpu_evaluator"]["resources"]["GPU"] == 1
    assert types["gpu_evaluator"]["min_workers"] >= 1
    cpu_types = [n for n, t in types.items() if n != "head" and "GPU" not in t["resources"]]
    assert cpu_types, "needs a CPU worker type for the agents"


def test_launcher_yaml_installs_sr_dist_and_turns_on_token_auth():
    config = _launcher()
    gpu_setup = " ".join(config["available_node_types"]["gpu_evaluator"]["worker_setup_commands"])
    assert "sr-dist[cuda,cluster]" in gpu_setup
    assert "sr-dist[cluster]" in " ".join(config["setup_commands"])
    for key in ("head_start_ray_commands", "worker_start_ray_commands"):
        start = [c for c in config[key] if "ray start" in c]
        assert start and all("RAY_AUTH_MODE=token" in c for c in start)
    assert "~/.ray/auth_token" in config["file_mounts"]
    assert "RAY_AUTH_TOKEN=" not in (CLUSTER / "ray-cluster.yaml").read_text()  # no secrets


@pytest.mark.parametrize("breakage", [
    lambda c: c.update(not_a_field=1),
    lambda c: c["available_node_types"]["gpu_evaluator"].pop("node_config"),
    lambda c: c.update(head_node_type="missing"),
])
def test_the_validator_rejects_broken_copies(breakage):
    config = copy.deepcopy(_launcher())
    breakage(config)
    with pytest.raises((jsonschema.ValidationError, ValueError, KeyError)):
        validate_config(prepare_config(config))


# --- KubeRay RayJob ----------------------------------------------------------------------------

def test_rayjob_manifest_is_well_formed():
    job = yaml.safe_load((CLUSTER / "rayjob.yaml").read_text())
    assert job["apiVersion"] == "ray.io/v1" and job["kind"] == "RayJob"
    spec = job["spec"]
    assert spec["entrypoint"].split()[0] == "sr-dist"
    assert "ray.address=auto" in spec["entrypoint"]
    assert "results.path=/mnt/shared/" in spec["entrypoint"]
    assert isinstance(yaml.safe_load(spec["runtimeEnvYAML"]), dict)
    cluster = spec["rayClusterSpec"]
    assert cluster["authOptions"]["mode"] == "token"
    assert cluster["headGroupSpec"]["template"]["spec"]["containers"]
    groups = {g["groupName"]: g for g in cluster["workerGroupSpecs"]}

    def limits(group):
        return group["template"]["spec"]["containers"][0]["resources"]["limits"]

    gpu = [g for g in groups.values() if str(limits(g).get("nvidia.com/gpu", "0")) != "0"]
    cpu = [g for g in groups.values() if "nvidia.com/gpu" not in limits(g)]
    assert len(gpu) == 1 and gpu[0]["replicas"] >= 1 and cpu
    for group in [cluster["headGroupSpec"], *groups.values()]:
        pod = group["template"]["spec"]
        mounts = {m["mountPath"] for c in pod["containers"] for m in c.get("volumeMounts", [])}
        assert "/mnt/shared" in mounts
    assert "token" not in spec["runtimeEnvYAML"].lower()


# --- submit.sh ---------------------------------------------------------------------------------

def test_submit_sh_parses():
    subprocess.run(["bash", "-n", str(CLUSTER / "submit.sh")], check=True)
    assert os.access(CLUSTER / "submit.sh", os.X_OK)


@pytest.fixture
def fake_ray(tmp_path) -> tuple[dict[str, str], Path]:
    """A `ray` executable that records its argv (stands in for a cluster's jobs API)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    script = bin_dir / "ray"
    script.write_text(
        f"#!{shutil.which('python3')}\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    home = tmp_path / "home"
    home.mkdir()
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(home)}
    return env, record


def _submit(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(CLUSTER / "submit.sh"), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_submit_sh_passes_overrides_and_keeps_the_token_out_of_argv(fake_ray):
    env, record = fake_ray
    env = {**env, "RAY_AUTH_TOKEN": "s3cret-token", "RAY_ADDRESS": "http://head:8265",
           "SR_DIST_RESULTS": "/mnt/shared/r"}
    done = _submit(env, "dataset.source=feynman:I.6.2", "search.agents=8")
    assert done.returncode == 0, done.stderr
    argv = json.loads(record.read_text())
    assert argv[:4] == ["job", "submit", "--address", "http://head:8265"]
    runtime_env = json.loads(argv[argv.index("--runtime-env-json") + 1])
    assert runtime_env["env_vars"] and "working_dir" not in runtime_env
    assert runtime_env["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == "60"  # ray job stop waits
    entry = argv[argv.index("--") + 1:]
    assert entry[:2] == ["sr-dist", "ray.address=auto"]
    assert "results.path=/mnt/shared/r" in entry and "ray.auth_mode=token" in entry
    assert entry[-2:] == ["dataset.source=feynman:I.6.2", "search.agents=8"]
    assert "s3cret-token" not in json.dumps(argv)


def test_submit_sh_accepts_the_default_token_file_and_a_working_dir(fake_ray, tmp_path):
    env, record = fake_ray
    (Path(env["HOME"]) / ".ray").mkdir()
    (Path(env["HOME"]) / ".ray" / "auth_token").write_text("tok")
    env = {**env, "SR_DIST_WORKING_DIR": str(tmp_path), "SR_DIST_NO_WAIT": "1"}
    done = _submit(env)
    assert done.returncode == 0, done.stderr
    argv = json.loads(record.read_text())
    assert "--no-wait" in argv
    assert json.loads(argv[argv.index("--runtime-env-json") + 1])["working_dir"] == str(tmp_path)


@pytest.mark.parametrize("extra,message", [
    ({}, "no Ray auth token"),
    ({"RAY_AUTH_TOKEN_PATH": "/nonexistent/token"}, "missing or empty"),
    ({"RAY_AUTH_MODE": "maybe"}, "must be 'token' or 'disabled'"),
])
def test_submit_sh_refuses_without_a_usable_token(fake_ray, extra, message):
    env, record = fake_ray
    done = _submit({**env, **extra})
    assert done.returncode == 2 and message in done.stderr
    assert not record.exists()
