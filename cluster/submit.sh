#!/usr/bin/env bash
# Submit one sr-dist run to a running Ray cluster as a Ray job.
#
#   cluster/submit.sh [HYDRA_OVERRIDE ...]
#   cluster/submit.sh dataset.source=feynman:I.6.2 search.agents=16 model=openai
#
# Environment:
#   RAY_ADDRESS         jobs API of the cluster (default http://127.0.0.1:8265, e.g. through
#                       `ray dashboard cluster/ray-cluster.yaml` or a port-forward)
#   RAY_AUTH_MODE       token (default) or disabled (only for a cluster started without auth)
#   RAY_AUTH_TOKEN      the cluster's token, or RAY_AUTH_TOKEN_PATH, or ~/.ray/auth_token
#   SR_DIST_RESULTS     results.path on the cluster (default /mnt/shared/sr-dist/results)
#   SR_DIST_EVALUATOR   evaluator config group (default gpu)
#   SR_DIST_WORKING_DIR ship this local directory as the job's working_dir (default: none;
#                       the nodes already have sr-dist installed)
#   SR_DIST_NO_WAIT     1: return after submitting instead of following the logs
#   SR_DIST_STOP_WAIT_S seconds `ray job stop` gives the run to stop cleanly (default 60)
set -euo pipefail

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
}

if [[ "${1:-}" == "-h" || "${1:-}" == "--help" ]]; then
    usage
    exit 0
fi

export RAY_ADDRESS="${RAY_ADDRESS:-http://127.0.0.1:8265}"
export RAY_AUTH_MODE="${RAY_AUTH_MODE:-token}"
results="${SR_DIST_RESULTS:-/mnt/shared/sr-dist/results}"
evaluator="${SR_DIST_EVALUATOR:-gpu}"

case "$RAY_AUTH_MODE" in
    token)
        if [[ -n "${RAY_AUTH_TOKEN:-}" ]]; then
            :
        elif [[ -n "${RAY_AUTH_TOKEN_PATH:-}" ]]; then
            if [[ ! -s "$RAY_AUTH_TOKEN_PATH" ]]; then
                echo "submit.sh: RAY_AUTH_TOKEN_PATH=$RAY_AUTH_TOKEN_PATH is missing or empty" >&2
                exit 2
            fi
        elif [[ ! -s "$HOME/.ray/auth_token" ]]; then
            echo "submit.sh: no Ray auth token: set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, or" \
                 "put the cluster's token in ~/.ray/auth_token (see cluster/README.md)" >&2
            exit 2
        fi
        ;;
    disabled)
        echo "submit.sh: warning: RAY_AUTH_MODE=disabled; only for clusters without token auth" >&2
        ;;
    *)
        echo "submit.sh: RAY_AUTH_MODE must be 'token' or 'disabled', not '$RAY_AUTH_MODE'" >&2
        exit 2
        ;;
esac

if ! command -v ray >/dev/null 2>&1; then
    echo "submit.sh: the 'ray' CLI is not on PATH (pip install 'sr-dist[cluster]')" >&2
    exit 2
fi

# The runtime env holds no secrets: the token never leaves this shell's environment.
python_bin="$(command -v python3 || command -v python)"
runtime_env="$("$python_bin" - "${SR_DIST_WORKING_DIR:-}" "${SR_DIST_STOP_WAIT_S:-60}" <<'PY'
import json, sys
# `ray job stop` sends SIGTERM, then SIGKILL after RAY_JOB_STOP_WAIT_TIME_S (3 s by default):
# give sr-dist time to stop its agents, flush and write its runs row (docs/reliability.md).
env = {"env_vars": {"PYTHONUNBUFFERED": "1", "RAY_JOB_STOP_WAIT_TIME_S": sys.argv[2]}}
if sys.argv[1]:
    env["working_dir"] = sys.argv[1]
    env["excludes"] = [".git", ".venv", "results", "outputs", "**/__pycache__"]
print(json.dumps(env))
PY
)"

submit_args=(--address "$RAY_ADDRESS" --runtime-env-json "$runtime_env")
if [[ "${SR_DIST_NO_WAIT:-0}" == "1" ]]; then
    submit_args+=(--no-wait)
fi

# User overrides come last, so they win over the defaults above.
exec ray job submit "${submit_args[@]}" -- \
    sr-dist ray.address=auto ray.auth_mode="$RAY_AUTH_MODE" evaluator="$evaluator" \
    results.path="$results" "$@"
