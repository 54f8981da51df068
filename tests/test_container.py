"""The container image (Dockerfile): what it runs, run here as written, and the image itself
built and served when a container runtime is present.

No container engine is needed for the first tests: they read the Dockerfile's final stage
and run its ENTRYPOINT + CMD and its HEALTHCHECK as processes on this machine, with the
volume's directory and the exposed port swapped for a temp dir and a free port. The last
test builds the image and talks to a container over HTTP; without docker or podman (or
with one whose daemon does not answer) it is skipped, saying which.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import uuid
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from gem.server.endpoint import pid_alive, read_endpoint
from servers import HANG, client, get, wait_for

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = ROOT / "Dockerfile"
BIN = os.path.dirname(sys.executable)


# ---------------------------------------------------------------------- the Dockerfile
@dataclass
class Stage:
    """The instructions of one build stage that the tests look at."""
    copies: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    volumes: list[str] = field(default_factory=list)
    exposed: list[str] = field(default_factory=list)
    healthcheck: list[str] | None = None
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)

    @property
    def command(self) -> list[str]:
        return self.entrypoint + self.cmd


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order: comments dropped, continued lines joined."""
    out, pending = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue  # a comment inside a continued instruction is dropped too, as docker does
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        keyword, _, rest = (pending + line).strip().partition(" ")
        out.append((keyword.upper(), rest.strip()))
        pending = ""
    return out


def _exec_form(arguments: str, where: str) -> list[str]:
    value = json.loads(arguments)  # the shell form would put /bin/sh -c between docker and gem
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), \
        f"{where} is not in exec form (a JSON array of strings): {arguments}"
    return value


def stages(text: str) -> list[Stage]:
    found: list[Stage] = []
    for keyword, rest in instructions(text):
        if keyword == "FROM":
            found.append(Stage())
            continue
        stage = found[-1]
        if keyword == "COPY" and not rest.startswith("--from"):
            stage.copies += shlex.split(rest)[:-1]
        elif keyword == "ENV":
            words = shlex.split(rest)
            if "=" in words[0]:
                stage.env.update(w.split("=", 1) for w in words)
            else:  # the legacy form ENV KEY VALUE
                stage.env[words[0]] = rest.split(None, 1)[1]
        elif keyword == "USER":
            stage.user = rest
        elif keyword == "VOLUME":
            stage.volumes += json.loads(rest) if rest.startswith("[") else rest.split()
        elif keyword == "EXPOSE":
            stage.exposed += [p.split("/")[0] for p in rest.split()]
        elif keyword == "HEALTHCHECK":
            options = re.match(r"((?:--[\w-]+=\S+\s+)*)CMD\s+(.*)", rest, re.S)
            assert options, f"HEALTHCHECK without CMD: {rest}"
            stage.healthcheck = _exec_form(options.group(2), "HEALTHCHECK CMD")
        elif keyword == "ENTRYPOINT":
            stage.entrypoint, stage.cmd = _exec_form(rest, "ENTRYPOINT"), []  # resets CMD
        elif keyword == "CMD":
            stage.cmd = _exec_form(rest, "CMD")
    return found


IMAGE = stages(DOCKERFILE.read_text(encoding="utf-8"))[-1]  # the stage that is the image


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_the_image_runs_gem_serve_as_a_user_on_a_volume_with_a_health_check():
    assert IMAGE.user and IMAGE.user.split(":")[0] not in ("root", "0")
    assert IMAGE.volumes == ["/data"]
    command = IMAGE.command
    assert command[:2] == ["gem", "serve"]
    assert command[2].startswith("/data/"), "the database must live in the volume"
    assert command[command.index("--host") + 1] == "0.0.0.0"  # reachable through a published port
    (port,) = IMAGE.exposed
    assert command[command.index("--port") + 1] == port
    assert IMAGE.healthcheck and IMAGE.healthcheck[0] == "python"  # slim has no curl
    assert f"http://127.0.0.1:{port}/v1/health" in IMAGE.healthcheck[-1]


# ---------------------------------------------------------------------- run here as written
@dataclass
class Local:
    """The image's command and health check as they run on this machine."""
    data: Path
    port: str
    env: dict[str, str]

    def here(self, argument: str) -> str:
        (exposed,) = IMAGE.exposed
        argument = re.sub(r"(?<![\w/])/data(?=/|$)", str(self.data), argument)
        return re.sub(rf"(?<!\d){exposed}(?!\d)", self.port, argument)

    def healthcheck(self) -> subprocess.CompletedProcess:
        return subprocess.run([self.here(a) for a in IMAGE.healthcheck], env=self.env,
                              capture_output=True, text=True, timeout=HANG)


@pytest.fixture
def local(tmp_path) -> Local:
    data, home = tmp_path / "data", tmp_path / "home"  # the volume and the WORKDIR
    data.mkdir()
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}
    for name, value in IMAGE.env.items():  # $VAR expands against this machine's environment
        env[name] = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m.group(1), ""), value)
    # The image's /opt/gem/bin is this venv's bin here: `gem` and `python` are found there first.
    env["PATH"] = BIN + os.pathsep + env["PATH"]
    return Local(data, _free_port(), env)


@pytest.fixture
def run_image(local, tmp_path):
    """Start the image's ENTRYPOINT + CMD (plus what `docker run IMAGE ...` appends) as a
    process group here; teardown kills the group by its pid and checks it is gone."""
    started: list[subprocess.Popen] = []

    def run(*appended: str) -> tuple[subprocess.Popen, Path]:
        log = tmp_path / f"container-{len(started)}.log"
        command = [local.here(a) for a in IMAGE.command] + list(appended)
        with open(log, "wb") as out:
            process = subprocess.Popen(command, cwd=local.env["HOME"], env=local.env,
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                       start_new_session=True)
        started.append(process)
        database = local.here(IMAGE.command[2])

        def up() -> bool:
            if process.poll() is not None:
                raise AssertionError(f"the image's command exited {process.returncode}: "
                                     f"{log.read_text()}")
            endpoint = read_endpoint(database)
            return endpoint is not None and endpoint.pid == process.pid
        wait_for(up, what="the image's command to listen")
        return process, log

    yield run
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait(timeout=HANG)
        assert not pid_alive(process.pid)


def _ready(url: str) -> bool:
    try:
        return get(url + "/health").status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.slow
def test_the_image_command_serves_the_volume_and_passes_its_health_check(local, run_image):
    down = local.healthcheck()
    assert down.returncode != 0, "the health check passed with nothing listening"
    process, log = run_image()
    url = f"http://127.0.0.1:{local.port}/v1"
    # Ready once the memory is open (503 until then); the check must pass then.
    wait_for(lambda: _ready(url), what="the server to open the memory")
    check = local.healthcheck()
    assert check.returncode == 0, check.stderr
    with client(url) as c:
        r = c.post("/ingest", json={"facts": [{"topic": "Website Redesign", "field": "deadline",
                                               "value": "April 20", "source": "chat:2"}]})
        assert r.status_code == 200, r.text
        r = c.post("/retrieve", json={"query": "deadline of the website redesign"})
        assert r.json()["topics"][0]["fields"]["deadline"]["value"] == "April 20"
    assert (local.data / "memory.db").exists(), "the database is not in the volume"
    assert "without --keys" in log.read_text()  # what the README tells users to act on
    process.send_signal(signal.SIGTERM)  # what `docker stop` sends to PID 1
    assert process.wait(timeout=HANG) == 0, log.read_text()


@pytest.mark.slow
def test_keys_appended_to_the_image_command_require_a_key_and_keep_the_health_check(
        local, run_image, tmp_path):
    key = "kA7xQ2mV9pL4sR8tW1yZ3bN6"
    keys = tmp_path / "keys.json"  # in the README: a file mounted at /keys/keys.json
    keys.write_text(json.dumps({key: "*"}), encoding="utf-8")
    process, log = run_image("--keys", str(keys))
    wait_for(lambda: _ready(f"http://127.0.0.1:{local.port}/v1"), what="the server to open the memory")
    check = local.healthcheck()  # /v1/health answers without a key
    assert check.returncode == 0, check.stderr
    url = f"http://127.0.0.1:{local.port}/v1/stats"
    assert get(url).status_code == 401
    assert get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    assert "without --keys" not in log.read_text()


# ---------------------------------------------------------------------- the build context
def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore keeps `path` (or a directory above it) out of the build context."""
    ignored = False
    for pattern in patterns:
        keep = pattern.startswith("!")
        body = pattern.lstrip("!").strip("/")
        regex = "".join(".*" if part == "**" else "[^/]*" if part == "*" else "[^/]" if part == "?"
                        else re.escape(part) for part in re.split(r"(\*\*|\*|\?)", body))
        regex = regex.replace(".*/", "(?:.*/)?")  # `**/x` also matches x at the top
        parts = path.split("/")
        if any(re.fullmatch(regex, "/".join(parts[:n])) for n in range(1, len(parts) + 1)):
            ignored = not keep
    return ignored


def _dockerignore() -> list[str]:
    lines = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.startswith("#")]


def test_the_dockerignore_keeps_local_state_out_and_what_the_build_copies_in():
    patterns = _dockerignore()
    for local_state in (".git", ".venv", ".ci-venv", "bench/out/report.html", "agent.db",
                        "gem/__pycache__/x.pyc", "tests/x.py"):
        assert _ignored(local_state, patterns), local_state
    build = stages(DOCKERFILE.read_text(encoding="utf-8"))[0]
    assert build.copies
    for source in build.copies:
        assert not _ignored(source, patterns), f"the build copies {source}, .dockerignore drops it"


@pytest.mark.slow
def test_what_the_build_stage_copies_makes_a_wheel_with_the_gem_command(tmp_path):
    """The build stage installs from its COPY lines alone: the wheel they make must carry what
    gem reads at run time (tests/test_packaging.py checks the same of the whole checkout)."""
    patterns = _dockerignore()
    context = tmp_path / "context"
    for source in stages(DOCKERFILE.read_text(encoding="utf-8"))[0].copies:
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, context / source, ignore=lambda d, names: [
                n for n in names if _ignored(os.path.relpath(os.path.join(d, n), ROOT), patterns)])
        else:
            context.mkdir(exist_ok=True)
            shutil.copy2(origin, context / source)
    out = tmp_path / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(out),
                    str(context)], check=True, timeout=HANG)
    (built,) = out.glob("*.whl")
    with zipfile.ZipFile(built) as z:
        names = set(z.namelist())
        (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        assert "gem = gem.cli:main" in z.read(entry_points).decode()
    assert {"gem/_data/grammar/policy.lark", "gem/_data/policies/default.policy",
            "gem/llm/prompts/extract.md", "gem/server/runner.py"} <= names
    assert not [n for n in names if "__pycache__" in n]


# ---------------------------------------------------------------------- the image itself
def _runtime() -> str:
    """docker or podman, whichever is on PATH and answers; otherwise the test is skipped,
    saying why."""
    found = [name for name in ("docker", "podman") if shutil.which(name)]
    if not found:
        pytest.skip("no container runtime: neither docker nor podman is on PATH")
    silent = []
    for name in found:
        info = subprocess.run([name, "info"], capture_output=True, text=True, timeout=HANG)
        if info.returncode == 0:
            return name
        reason = (info.stderr.strip() or info.stdout.strip()).splitlines()
        silent.append(f"{name} is installed but its daemon does not answer: "
                      f"{reason[-1] if reason else f'`{name} info` exited {info.returncode}'}")
    pytest.skip("; ".join(silent))


@pytest.fixture
def container_runtime():
    """The runtime and a list of (command...) to run in teardown, in reverse order."""
    runtime = _runtime()
    cleanup: list[list[str]] = []
    yield runtime, cleanup
    for command in reversed(cleanup):
        subprocess.run(command, capture_output=True, timeout=HANG)


def _ok(*command: str) -> str:
    done = subprocess.run(command, capture_output=True, text=True, timeout=HANG)
    assert done.returncode == 0, f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}"
    return done.stdout.strip()


@pytest.mark.slow
def test_the_image_builds_and_serves_from_a_volume(container_runtime):
    runtime, cleanup = container_runtime
    tag = f"gem-test-{uuid.uuid4().hex[:12]}"
    volume = tag + "-data"
    cleanup.append([runtime, "image", "rm", "-f", tag])
    _ok(runtime, "build", "-t", tag, str(ROOT))
    cleanup.append([runtime, "volume", "rm", "-f", volume])
    _ok(runtime, "volume", "create", volume)
    (port,) = IMAGE.exposed
    # The Dockerfile's interval (30 s) would make the test wait that long for the first check:
    # the same check, run every second.
    container = _ok(runtime, "run", "-d", "--health-interval", "1s", "-p", f"127.0.0.1::{port}",
                    "-v", f"{volume}:/data", tag)
    cleanup.append([runtime, "rm", "-f", container])

    def healthy() -> bool:
        state = json.loads(_ok(runtime, "inspect", "--format", "{{json .State}}", container))
        if not state.get("Running"):
            logs = subprocess.run([runtime, "logs", container], capture_output=True, text=True,
                                  timeout=HANG)
            raise AssertionError(f"the container stopped: {state}\n{logs.stdout}{logs.stderr}")
        if runtime == "podman":  # podman runs health checks from systemd timers, if at all
            return subprocess.run(["podman", "healthcheck", "run", container],
                                  capture_output=True, timeout=HANG).returncode == 0
        return (state.get("Health") or {}).get("Status") == "healthy"
    wait_for(healthy, what="the container to be healthy")
    published = _ok(runtime, "port", container, f"{port}/tcp").splitlines()[0]
    with client(f"http://127.0.0.1:{published.rsplit(':', 1)[1]}/v1") as c:
        r = c.post("/ingest", json={"facts": [{"topic": "Website Redesign", "field": "deadline",
                                               "value": "April 20", "source": "chat:2"}]})
        assert r.status_code == 200, r.text
        r = c.post("/retrieve", json={"query": "deadline of the website redesign"})
        assert r.json()["topics"][0]["fields"]["deadline"]["value"] == "April 20"
    assert _ok(runtime, "exec", container, "id", "-u") != "0"
    _ok(runtime, "stop", container)  # SIGTERM to gem: it closes the database and exits 0
    code = _ok(runtime, "inspect", "--format", "{{.State.ExitCode}}", container)
    assert code == "0", subprocess.run([runtime, "logs", container], capture_output=True,
                                       text=True, timeout=HANG).stderr
