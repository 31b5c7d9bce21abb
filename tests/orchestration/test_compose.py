"""The production-like stack (docker-compose.yaml and its Dockerfile), checked without Docker: no machine of this
project runs a Docker engine, so these tests read the files and hold them to the code — the settings
``csparql.deploy.settings.Settings`` accepts, the connections the Spark provider's hooks resolve, the options Airflow
knows — and the services to each other (hosts, ports, mounts, secrets). Nothing here starts Spark or Airflow.

The compose file is read as ``docker compose`` reads it: YAML with anchors and merge keys, then ``${VAR:-default}``
interpolated, by default with no variable set (``docker compose up`` without a ``.env``).
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from functools import cache
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pytest
import yaml

from csparql.deploy.settings import SPARK_MODES, Settings
from support import tool_missing

pytestmark = pytest.mark.airflow

REPOSITORY = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPOSITORY / "docker-compose.yaml"
DOCKERFILE = REPOSITORY / "Dockerfile"
DOCKERIGNORE = REPOSITORY / ".dockerignore"

DATABASE = "postgres"
INIT = "airflow-init"
API_SERVER = "airflow-apiserver"
SCHEDULER = "airflow-scheduler"
AIRFLOW_SERVICES = (API_SERVER, SCHEDULER, "airflow-dag-processor", "airflow-triggerer")
SPARK_MASTER, SPARK_WORKER, SPARK_CONNECT = "spark-master", "spark-worker", "spark-connect"
SPARK_SERVICES = (SPARK_MASTER, SPARK_WORKER, SPARK_CONNECT)
LONG_RUNNING = (DATABASE, *AIRFLOW_SERVICES, *SPARK_SERVICES)
WAREHOUSE_VOLUME = "warehouse"
CONDITIONS = ("service_started", "service_healthy", "service_completed_successfully")
SHARED_SECRETS = (  # what every Airflow component must agree on (Airflow 3.3's config.yml)
    "AIRFLOW__API_AUTH__JWT_SECRET",  # the scheduler signs task tokens, the api-server checks them
    "AIRFLOW__CORE__FERNET_KEY",  # connections and variables in the metadata database
    "AIRFLOW__API__SECRET_KEY",  # log access between components
)
DRIVER_PACKAGES = {"psycopg2": ("psycopg2-binary", "psycopg2"), "asyncpg": ("asyncpg",), "psycopg": ("psycopg",)}
DEBIAN_RELEASES_WITH_JAVA_17 = ("bullseye", "bookworm")  # trixie packages only OpenJDK 21 and 25


# reading the compose file

_VARIABLE = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<operator>:?[-?+])(?P<argument>[^}]*))?\}"
    r"|(?P<named>[A-Za-z_][A-Za-z0-9_]*))"
)


def interpolate(value, variables: dict[str, str]):
    """``value`` with compose's ``$VAR``, ``${VAR}``, ``${VAR:-default}``, ``${VAR-default}``, ``${VAR:?error}``,
    ``${VAR:+alternative}`` and ``$$`` replaced as ``docker compose`` does, given ``variables``."""
    if isinstance(value, dict):
        return {key: interpolate(item, variables) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, variables) for item in value]
    if not isinstance(value, str):
        return value

    def substitute(match: re.Match) -> str:
        if match["escaped"]:
            return "$"
        name = match["braced"] or match["named"]
        operator, argument = match["operator"], match["argument"] or ""
        given = variables.get(name)
        missing = given is None or (operator is not None and operator.startswith(":") and given == "")
        if operator in (":-", "-"):
            return argument if missing else given
        if operator in (":?", "?"):
            if missing:
                pytest.fail(f"docker-compose.yaml requires ${name} ({argument}): `docker compose up` fails without it")
            return given
        if operator in (":+", "+"):
            return "" if missing else argument
        return given or ""

    return _VARIABLE.sub(substitute, value)


@cache
def _compose(variables: tuple[tuple[str, str], ...]) -> dict:
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    return interpolate(document, dict(variables))


def compose(**variables: str) -> dict:
    """docker-compose.yaml as ``docker compose`` sees it with these variables set (none by default)."""
    return _compose(tuple(sorted(variables.items())))


def service(name: str, **variables: str) -> dict:
    services = compose(**variables).get("services") or {}
    assert name in services, f"docker-compose.yaml defines no service '{name}' (it has: {', '.join(services)})"
    return services[name]


def environment(name: str, **variables: str) -> dict[str, str]:
    """A service's environment as strings (compose accepts a mapping or a list of KEY=VALUE)."""
    given = service(name, **variables).get("environment") or {}
    if isinstance(given, list):
        given = dict(item.split("=", 1) if "=" in item else (item, None) for item in given)
    return {key: "" if value is None else str(value) for key, value in given.items()}


def variable(name: str, key: str, **variables: str) -> str:
    env = environment(name, **variables)
    assert env.get(key), f"the service '{name}' does not set {key}"
    return env[key]


def command(name: str) -> list[str]:
    given = service(name).get("command")
    assert given, f"the service '{name}' has no command"
    return list(given) if isinstance(given, list) else shlex.split(given)


def option(tokens: list[str], flag: str, name: str) -> str:
    assert flag in tokens, f"the command of '{name}' has no {flag}: {shlex.join(tokens)}"
    position = tokens.index(flag)
    assert position + 1 < len(tokens), f"{flag} has no value in the command of '{name}'"
    return tokens[position + 1]


def spark_confs(tokens: list[str]) -> dict[str, str]:
    return dict(tokens[i + 1].split("=", 1) for i, token in enumerate(tokens) if token == "--conf")


def java_properties(text: str) -> dict[str, str]:
    return dict(token[2:].split("=", 1) for token in shlex.split(text) if token.startswith("-D") and "=" in token)


def mounts(name: str) -> list[tuple[str, str]]:
    """(source, target) of each volume of a service, short or long syntax."""
    found = []
    for volume in service(name).get("volumes") or []:
        if isinstance(volume, dict):
            found.append((str(volume.get("source", "")), str(volume["target"])))
        else:
            source, _, rest = volume.partition(":")
            found.append((source, rest.split(":")[0]))
    return found


def bind_target(name: str, folder: str) -> str | None:
    """Where a service mounts the repository's ``folder`` (``./folder`` or ``folder``), None if it does not."""
    for source, target in mounts(name):
        if source.rstrip("/") in (f"./{folder}", folder):
            return target
    return None


def depends_on(name: str) -> dict[str, str]:
    given = service(name).get("depends_on") or {}
    if isinstance(given, list):
        return {other: "service_started" for other in given}
    return {other: (spec or {}).get("condition", "service_started") for other, spec in given.items()}


def healthcheck_command(name: str) -> str:
    test = (service(name).get("healthcheck") or {}).get("test")
    return " ".join(test) if isinstance(test, list) else str(test or "")


def airflow_services() -> tuple[str, ...]:
    return (INIT, *AIRFLOW_SERVICES)


def settings_of(name: str, **variables: str) -> Settings:
    env = environment(name, **variables)
    try:
        return Settings.from_environment(env)
    except ValueError as error:
        pytest.fail(f"the csparql settings of '{name}' are refused by Settings.from_environment: {error}")


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    instructions = []
    for line in joined.splitlines():
        if line.strip():
            keyword, _, rest = line.strip().partition(" ")
            instructions.append((keyword.upper(), " ".join(rest.split())))
    return instructions


def dockerfile_runs() -> str:
    arguments = dict(re.findall(r'(\w+)="?([^"]*)"?', " ".join(a for k, a in dockerfile_instructions() if k == "ARG")))
    runs = " && ".join(a for k, a in dockerfile_instructions() if k == "RUN")
    return re.sub(r"\$\{?(\w+)\}?", lambda m: arguments.get(m[1], m[0]), runs)


# the services and how they start


@pytest.mark.parametrize("name", LONG_RUNNING)
def test_each_long_running_service_has_a_health_check(name):
    healthcheck = service(name).get("healthcheck") or {}
    test = healthcheck.get("test")
    assert test and test != ["NONE"] and not healthcheck.get("disable"), (
        f"the service '{name}' has no health check: services that wait for it cannot use service_healthy")


def test_the_init_service_runs_once_and_every_airflow_component_waits_for_it():
    assert str(service(INIT).get("restart", "no")) == "no", f"'{INIT}' is one-shot: it must not restart"
    for name in AIRFLOW_SERVICES:
        waits = depends_on(name)
        assert waits.get(INIT) == "service_completed_successfully", (
            f"'{name}' must start after '{INIT}' migrated the database (depends_on {INIT}: "
            f"service_completed_successfully), it has {waits.get(INIT)!r}")
        assert waits.get(DATABASE) == "service_healthy", f"'{name}' must wait for '{DATABASE}' to be healthy"
    assert depends_on(INIT).get(DATABASE) == "service_healthy", f"'{INIT}' must wait for '{DATABASE}' to be healthy"


def test_depends_on_names_services_that_exist_with_conditions_they_can_meet():
    services = compose()["services"]
    for name in services:
        for other, condition in depends_on(name).items():
            assert other in services, f"'{name}' depends on '{other}', which docker-compose.yaml does not define"
            assert condition in CONDITIONS, f"'{name}' waits for '{other}' with the unknown condition {condition!r}"
            if condition == "service_healthy":
                assert (services[other].get("healthcheck") or {}).get("test"), (
                    f"'{name}' waits for '{other}' to be healthy, but '{other}' has no health check")
            if condition == "service_completed_successfully":
                assert str(services[other].get("restart", "no")) == "no", (
                    f"'{name}' waits for '{other}' to complete, but '{other}' restarts and never completes")


def test_every_csparql_service_runs_the_one_image():
    images = {name: service(name).get("image") for name in (*airflow_services(), *SPARK_SERVICES)}
    assert len(set(images.values())) == 1 and None not in images.values(), (
        f"every Airflow and Spark service must run the image built from the Dockerfile, found {images}")
    for name in images:
        assert service(name).get("build"), f"'{name}' has no build section: `docker compose up --build` would pull it"


# the csparql settings


@pytest.mark.parametrize("name", airflow_services())
def test_csparql_variables_are_settings_the_code_reads_and_accepts(name):
    known = set(Settings.ENVIRONMENT.values())
    set_here = {key for key in environment(name) if key.startswith("CSPARQL_")}
    assert set_here <= known, (
        f"'{name}' sets {sorted(set_here - known)}, which Settings.from_environment does not read "
        f"(it reads {sorted(known)})")
    assert "CSPARQL_WAREHOUSE" in set_here, f"'{name}' must set CSPARQL_WAREHOUSE (the warehouse volume's path)"
    settings = settings_of(name)
    assert settings.warehouse.root == Path(environment(name)["CSPARQL_WAREHOUSE"]).resolve()


def test_every_airflow_component_sees_the_same_csparql_settings():
    def csparql(name):
        return {key: value for key, value in environment(name).items() if key.startswith("CSPARQL_")}

    reference = csparql(SCHEDULER)
    for name in airflow_services():
        assert csparql(name) == reference, (
            f"'{name}' and '{SCHEDULER}' see different csparql settings: the DAG processor, the triggerer and the "
            f"tasks would disagree on the registry, the warehouse or the Spark mode\n{csparql(name)}\n{reference}")


def test_the_default_spark_mode_is_the_standalone_cluster():
    assert settings_of(SCHEDULER).spark == "standalone", "with no variable set, the stack evaluates on its cluster"


@pytest.mark.parametrize("mode", [m for m in SPARK_MODES if m != "local"])
def test_each_spark_mode_can_be_chosen_at_start_and_its_connection_is_defined(mode):
    settings = settings_of(SCHEDULER, CSPARQL_SPARK=mode)
    assert settings.spark == mode, (
        f"`CSPARQL_SPARK={mode} docker compose up` leaves the mode at {settings.spark!r}: "
        "set CSPARQL_SPARK from ${CSPARQL_SPARK:-...} in docker-compose.yaml")
    variable_name = f"AIRFLOW_CONN_{settings.connection_id.upper()}"
    for name in airflow_services():
        assert environment(name, CSPARQL_SPARK=mode).get(variable_name), (
            f"CSPARQL_SPARK={mode} uses the Airflow connection '{settings.connection_id}', but '{name}' does not "
            f"define {variable_name}")


# Spark: the connections, the cluster and the Connect server agree


def master_url() -> str:
    tokens = command(SPARK_MASTER)
    assert "org.apache.spark.deploy.master.Master" in tokens, f"'{SPARK_MASTER}' does not run the Master: {tokens}"
    return f"spark://{option(tokens, '--host', SPARK_MASTER)}:{option(tokens, '--port', SPARK_MASTER)}"


def test_the_master_advertises_the_host_name_the_others_resolve():
    host = option(command(SPARK_MASTER), "--host", SPARK_MASTER)
    assert host in (SPARK_MASTER, service(SPARK_MASTER).get("hostname")), (
        f"'{SPARK_MASTER}' binds to --host {host}, which other containers cannot resolve (use '{SPARK_MASTER}')")


def test_the_standalone_connection_gives_spark_submit_the_master_of_the_cluster(monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    settings = settings_of(SCHEDULER, CSPARQL_SPARK="standalone")
    variable_name = f"AIRFLOW_CONN_{settings.connection_id.upper()}"
    monkeypatch.setenv(variable_name, variable(SCHEDULER, variable_name, CSPARQL_SPARK="standalone"))
    hook = SparkSubmitHook(conn_id=settings.connection_id)
    resolved = hook._connection  # what the pinned provider (6.3.4) passes to spark-submit
    assert resolved["master"] == master_url(), (
        f"{variable_name} makes spark-submit use --master {resolved['master']}, but '{SPARK_MASTER}' listens on "
        f"{master_url()}")
    assert resolved["deploy_mode"] == "client", (
        f"{variable_name} must ask for deploy-mode=client: a standalone cluster cannot run a Python application "
        f"in cluster mode (found {resolved['deploy_mode']!r})")


def test_the_workers_and_the_connect_server_join_the_master():
    worker = command(SPARK_WORKER)
    assert "org.apache.spark.deploy.worker.Worker" in worker, f"'{SPARK_WORKER}' does not run the Worker: {worker}"
    urls = [token for token in worker if token.startswith("spark://")]
    assert urls == [master_url()], f"'{SPARK_WORKER}' registers with {urls}, the master is {master_url()}"
    connect = option(command(SPARK_CONNECT), "--master", SPARK_CONNECT)
    assert connect == master_url(), f"'{SPARK_CONNECT}' runs on --master {connect}, the master is {master_url()}"


def test_the_connect_connection_reaches_the_connect_server(monkeypatch):
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    tokens = command(SPARK_CONNECT)
    assert option(tokens, "--class", SPARK_CONNECT) == "org.apache.spark.sql.connect.service.SparkConnectServer"
    port = spark_confs(tokens).get("spark.connect.grpc.binding.port")
    assert port, f"'{SPARK_CONNECT}' does not set spark.connect.grpc.binding.port"
    settings = settings_of(SCHEDULER, CSPARQL_SPARK="connect")
    assert settings.spark == "connect", "CSPARQL_SPARK=connect does not switch the stack to Spark Connect"
    variable_name = f"AIRFLOW_CONN_{settings.connection_id.upper()}"
    monkeypatch.setenv(variable_name, variable(SCHEDULER, variable_name, CSPARQL_SPARK="connect"))
    url = urlsplit(SparkConnectHook(conn_id=settings.connection_id).get_connection_url())
    assert (url.scheme, url.hostname, url.port) == ("sc", SPARK_CONNECT, int(port)), (
        f"{variable_name} gives the Spark Connect URL {url.geturl()}, but the server is sc://{SPARK_CONNECT}:{port}")
    assert port in healthcheck_command(SPARK_CONNECT), f"the health check of '{SPARK_CONNECT}' probes another port"


def test_the_connect_server_applies_the_settings_its_clients_cannot_set():
    from csparql.runtime import session

    result_settings = getattr(session, "RESULT_SETTINGS", None)
    assert result_settings is not None, (
        "csparql.runtime.session.RESULT_SETTINGS is gone: update this test with where the settings results depend "
        "on now live")
    confs = spark_confs(command(SPARK_CONNECT))
    server_side = {key: value for key, value in result_settings.items() if not key.startswith("spark.sql.")}
    differing = {key: (value, confs.get(key)) for key, value in server_side.items() if confs.get(key) != value}
    assert not differing, (
        f"a Spark Connect client only sets spark.sql.* settings, so '{SPARK_CONNECT}' must be started with the others "
        f"of RESULT_SETTINGS (wanted, found): {differing}")
    cache = confs.get("spark.sql.codegen.cache.maxEntries", "Spark's default 100")
    assert cache == str(session.CODEGEN_CACHE_ENTRIES), (
        f"'{SPARK_CONNECT}' keeps {cache} compiled classes, csparql's sessions "
        f"{session.CODEGEN_CACHE_ENTRIES}: a static setting the server must be started with")
    assert confs.get("spark.driver.host") in (SPARK_CONNECT, service(SPARK_CONNECT).get("hostname")), (
        f"executors reach the Connect server's driver at spark.driver.host, which must be '{SPARK_CONNECT}'")


def test_executors_can_reach_the_driver_that_spark_submit_starts_in_the_scheduler():
    executor = variable(SCHEDULER, "AIRFLOW__CORE__EXECUTOR")
    assert executor == "LocalExecutor", f"tasks are expected to run in '{SCHEDULER}' (LocalExecutor), not {executor}"
    properties = java_properties(environment(SCHEDULER).get("SPARK_SUBMIT_OPTS", ""))
    host = properties.get("spark.driver.host")
    assert host in (SCHEDULER, service(SCHEDULER).get("hostname")), (
        f"spark-submit runs the driver in '{SCHEDULER}' (client mode) and csparql otherwise binds it to 127.0.0.1: "
        f"SPARK_SUBMIT_OPTS must give -Dspark.driver.host={SCHEDULER}, found {host!r}")


# mounts


@pytest.mark.parametrize("name", (*airflow_services(), *SPARK_SERVICES))
def test_the_warehouse_volume_is_mounted_at_csparql_warehouse(name):
    warehouse = variable(SCHEDULER, "CSPARQL_WAREHOUSE")
    targets = [target for source, target in mounts(name) if source == WAREHOUSE_VOLUME]
    assert targets == [warehouse], (
        f"'{name}' must mount the volume '{WAREHOUSE_VOLUME}' at CSPARQL_WAREHOUSE={warehouse} (Spark executors "
        f"read the tables' files by their paths), it mounts it at {targets}")
    assert WAREHOUSE_VOLUME in (compose().get("volumes") or {}), (
        f"the named volume '{WAREHOUSE_VOLUME}' is not declared")


@pytest.mark.parametrize("name", airflow_services())
def test_dags_are_mounted_where_airflow_looks_for_them(name):
    expected = variable(name, "AIRFLOW__CORE__DAGS_FOLDER")
    assert bind_target(name, "dags") == expected, (
        f"'{name}' mounts ./dags at {bind_target(name, 'dags')}, but AIRFLOW__CORE__DAGS_FOLDER={expected}")


def test_the_registry_is_inside_the_dags_folder():
    registry = PurePosixPath(variable(SCHEDULER, "CSPARQL_REGISTRY"))
    dags = PurePosixPath(variable(SCHEDULER, "AIRFLOW__CORE__DAGS_FOLDER"))
    assert registry.is_relative_to(dags), (
        f"the DAG processor parses {dags} only: the loaders beside the registry's queries in {registry} must be there")


def test_the_api_server_can_write_the_registry_and_mounts_everything_the_others_do():
    """The C-SPARQL pages run in the api-server and write the registry: it must be mounted writable there."""
    registry = variable(API_SERVER, "CSPARQL_REGISTRY")
    writable = [v for v in service(API_SERVER)["volumes"] if isinstance(v, str) and v.split(":")[1:2] == [registry]]
    assert writable == ["./dags/queries:" + registry], (
        f"'{API_SERVER}' must mount ./dags/queries writable at CSPARQL_REGISTRY={registry}, found {writable}")
    assert set(mounts(SCHEDULER)) <= set(mounts(API_SERVER)), "the api-server must mount what every Airflow service does"


@pytest.mark.parametrize("name", (*airflow_services(), *SPARK_SERVICES))
def test_csparql_is_the_installed_wheel_with_nothing_from_the_checkout_on_the_path(name):
    # Airflow finds the provider and the plugin through the wheel's entry points, the scheduler's spark-submit
    # its job inside the package, and the Spark Python workers import the same installed csparql as the tasks.
    assert "PYTHONPATH" not in environment(name), f"'{name}' must not set PYTHONPATH: csparql is the image's wheel"
    for folder in ("plugins", "spark_jobs"):
        assert bind_target(name, folder) is None, f"'{name}' must not mount ./{folder}: csparql is the image's wheel"


# Airflow's own settings


def test_the_execution_api_url_points_at_the_api_server():
    url = urlsplit(variable(SCHEDULER, "AIRFLOW__CORE__EXECUTION_API_SERVER_URL"))
    tokens = command(API_SERVER)
    assert "api-server" in tokens, f"'{API_SERVER}' does not run `airflow api-server`: {tokens}"
    port = int(option(tokens, "--port", API_SERVER)) if "--port" in tokens else 8080
    assert (url.scheme, url.hostname, url.port, url.path) == ("http", API_SERVER, port, "/execution/"), (
        f"tasks reach the Execution API at {url.geturl()}, but it is http://{API_SERVER}:{port}/execution/")
    assert f"localhost:{port}/api/v2/monitor/health" in healthcheck_command(API_SERVER), (
        f"the health check of '{API_SERVER}' must ask http://localhost:{port}/api/v2/monitor/health")
    published = [str(p).rsplit(":", 1)[-1] for p in service(API_SERVER).get("ports") or []]
    assert str(port) in published, f"'{API_SERVER}' does not publish its port {port} (the UI): {published}"


def airflow_knows(section: str, key: str) -> bool:
    from airflow.configuration import conf

    # has_option is False for an option without a default that is not set here, so look at the description too.
    described = conf.configuration_description.get(section, {}).get("options", {})
    return conf.has_option(section, key) or key in described or key.removesuffix("_cmd") in described \
        or key.removesuffix("_secret") in described


def test_every_airflow_variable_names_an_option_airflow_has():
    unknown = []
    for name in airflow_services():
        for key in environment(name):
            if not key.startswith("AIRFLOW__"):
                continue
            parts = key.split("__")
            if len(parts) != 3 or not all(parts):
                unknown.append(f"{name}: {key} (not AIRFLOW__SECTION__KEY)")
            elif not airflow_knows(parts[1].lower(), parts[2].lower()):
                unknown.append(f"{name}: {key} ([{parts[1].lower()}] {parts[2].lower()})")
    assert not unknown, "options Airflow 3.3 does not have:\n" + "\n".join(unknown)


@pytest.mark.parametrize("key", SHARED_SECRETS)
def test_every_airflow_component_shares_the_secret(key):
    values = {name: environment(name).get(key) for name in airflow_services()}
    lacking = sorted(name for name, value in values.items() if not value)
    assert not lacking, f"{key} must be set in every Airflow component: {lacking} lack it"
    assert len(set(values.values())) == 1, f"{key} differs between Airflow components: they must share it"
    value = next(iter(values.values()))
    if key == "AIRFLOW__CORE__FERNET_KEY":
        from cryptography.fernet import Fernet

        try:
            Fernet(value)
        except ValueError as error:
            pytest.fail(f"{key} is not a Fernet key ({error}): connections could not be encrypted")
    if key == "AIRFLOW__API_AUTH__JWT_SECRET":
        assert len(value.encode()) >= 64, f"{key} is shorter than the 64 bytes HS512 needs"


def test_the_database_urls_match_the_postgres_service_and_their_drivers_are_installed():
    database = environment(DATABASE)
    for key in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"):
        text = environment(SCHEDULER).get(key)
        if not text:
            continue
        url = urlsplit(text)
        backend, _, driver = url.scheme.partition("+")
        assert backend == "postgresql", f"{key} must use the postgresql scheme, found {url.scheme!r}"
        found = (url.hostname, url.username, url.password, url.path.lstrip("/"))
        wanted = (DATABASE, *(database.get(f"POSTGRES_{part}") for part in ("USER", "PASSWORD", "DB")))
        assert found == wanted, f"{key} connects as (host, user, password, database) {found}, '{DATABASE}' has {wanted}"
        assert driver in DRIVER_PACKAGES, f"{key} names the driver {driver!r}, unknown to this test"
        packages = "|".join(re.escape(p) for p in DRIVER_PACKAGES[driver])
        assert re.search(rf"(?<![\w-])({packages})==[\d.]+", dockerfile_runs()), (
            f"{key} uses {driver}, but the Dockerfile does not install {DRIVER_PACKAGES[driver][0]} (pinned with ==)")


def test_the_init_creates_the_pools_the_tasks_run_in():
    # the evaluations' pool and the ingests' own (in one shared pool, an ingest queued behind every backfilled
    # evaluation)
    tokens = command(INIT)
    script = tokens[-1] if tokens[:2] in (["bash", "-c"], ["sh", "-c"]) else shlex.join(tokens)
    steps = [shlex.split(step) for step in re.split(r"&&|;", script)]
    assert ["airflow", "db", "migrate"] in steps, f"'{INIT}' must run `airflow db migrate`: {script}"
    pools = [step for step in steps if step[:3] == ["airflow", "pools", "set"]]
    assert pools, f"'{INIT}' creates no pool (`airflow pools set NAME SLOTS DESCRIPTION`): {script}"
    assert steps.index(["airflow", "db", "migrate"]) < steps.index(pools[0]), "the pool is set before the migration"
    created = {step[3]: step[4] for step in pools}
    settings = settings_of(SCHEDULER)
    for used, default in ((settings.pool, Settings.pool), (settings.ingest_pool, Settings.ingest_pool)):
        assert used == default and used in created, (
            f"'{INIT}' creates the pools {sorted(created)}, the tasks run in {used!r} (default {default!r})")
    for name, slots in created.items():
        assert slots.isdigit() and int(slots) > 0, f"the pool {name} needs a positive number of slots, found {slots!r}"


# the image


def test_the_dockerfile_installs_the_project_with_its_pinned_constraints():
    copied = " ".join(a for k, a in dockerfile_instructions() if k in ("COPY", "ADD"))
    for needed in ("pyproject.toml", "constraints.txt", "plugins/csparql/"):
        assert needed in copied, f"the Dockerfile does not copy {needed} into the image"
    installs = [shlex.split(step) for step in dockerfile_runs().split("&&") if re.search(r"\bpip install\b", step)]
    assert any("." in step for step in installs), "the Dockerfile does not install the project (`pip install ... .`)"
    unpinned = [shlex.join(step) for step in installs if "constraints.txt" not in step[step.index("install"):]
                or step[step.index("constraints.txt") - 1] not in ("-c", "--constraint")]
    assert not unpinned, (
        "every pip install of the Dockerfile must use the pins, as scripts/bootstrap.sh does "
        f"(`pip install -c constraints.txt .`): {unpinned}")


def test_the_image_has_the_python_and_the_java_the_project_needs():
    from packaging.specifiers import SpecifierSet

    bases = [a for k, a in dockerfile_instructions() if k == "FROM"]
    assert len(bases) == 1, f"the Dockerfile should have one stage, found FROM {bases}"
    match = re.fullmatch(r"python:(\d+\.\d+)(?:\.\d+)?-slim-(\w+)", bases[0])
    assert match, f"the base image {bases[0]!r} is not python:X.Y-slim-<debian release>"
    python, release = match.groups()
    pyproject = (REPOSITORY / "pyproject.toml").read_text(encoding="utf-8")
    requires = re.search(r'^requires-python\s*=\s*"([^"]+)"', pyproject, re.M)[1]
    assert SpecifierSet(requires).contains(python), (
        f"the image's Python {python} does not meet requires-python {requires}")
    javas = re.findall(r"openjdk-(\d+)-jre(?:-headless)?|openjdk-(\d+)-jdk(?:-headless)?", dockerfile_runs())
    majors = [int(a or b) for a, b in javas]
    assert majors and min(majors) >= 17, (
        f"Spark 4 and scripts/bootstrap.sh need Java 17 or newer, the image installs {majors}")
    if 17 in majors:
        assert release in DEBIAN_RELEASES_WITH_JAVA_17, (
            f"Debian {release} does not package OpenJDK 17: pin the base image to one of "
            f"{DEBIAN_RELEASES_WITH_JAVA_17}")


def test_the_build_context_leaves_out_the_local_environment_and_data():
    ignored = {line.strip().rstrip("/") for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
               if line.strip() and not line.startswith("#")}
    for needed in (".venv", ".git", "delta_tables", "**/__pycache__"):
        assert needed in ignored, f".dockerignore does not leave out {needed}"


def compose_command() -> list[str]:
    """Compose v2 (`docker compose`) where the docker CLI has it, else Compose v1 (`docker-compose`)."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    tool_missing("neither `docker compose` nor `docker-compose` is installed, so the file cannot be checked "
                 "by Compose itself (apt-get install docker-compose)")


def test_docker_compose_accepts_the_file():
    done = subprocess.run([*compose_command(), "-f", str(COMPOSE_FILE), "config", "-q"], cwd=REPOSITORY,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"`docker compose config -q` refuses docker-compose.yaml:\n{done.stderr}"


def test_the_scheduler_examines_enough_runs_that_waiting_windows_do_not_starve_backfills():
    from csparql.stack.airflow_stack import DAGRUNS_PER_LOOP

    examined = int(variable(SCHEDULER, "AIRFLOW__SCHEDULER__MAX_DAGRUNS_PER_LOOP_TO_SCHEDULE"))
    assert examined == DAGRUNS_PER_LOOP, "the embedded stack and docker-compose should schedule alike"


def test_the_dag_processor_is_airflow_s_less_a_parse_per_run_that_ends_on_the_triggerer():
    from importlib.util import find_spec

    assert command("airflow-dag-processor") == ["python", "-m", "csparql.orchestration.dag_processor"]
    assert find_spec("csparql.orchestration.dag_processor") is not None
